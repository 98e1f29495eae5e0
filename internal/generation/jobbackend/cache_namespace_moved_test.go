package jobbackend_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/jobbackend"
	"github.com/videogen-dev/videogen-operator/internal/jobtest"
)

// TestAStageWhoseJobNamespaceWasMovedIsSubmittedAgainNotFailed keeps a stage's Job found after the
// Job backend's namespace moves from "" (each task's namespace) to one of its own: workHandle
// accepts the task's namespace besides the configured one, and docs/job-backend.md says
// "running stages keep finding their Jobs in their tasks' namespaces". Its pin
// (TestTheWorksOwnHandlesAreStillUsed) reads through a fake client. The manager reads Jobs and
// pods through its cache, which CacheByObject limits to the configured namespace once one is
// set (cmd/manager/main.go): a Get in a task's namespace is refused by the cache ("unable to
// get: … because of unknown namespace for the cache"), an ordinary error. Interleaving:
// 1. jobs.yaml says namespace: ""; a render runs as the Job <task ns>/vt-…-render. 2. The
// platform team sets namespace: videogen-jobs (docs/job-backend.md recommends a namespace of
// its own where the task namespaces are reachable by customers) and restarts the manager.
// 3. Every look at the stage fails in the cache. What the user sees: "backend unavailable:
// reading Job …: unable to get … unknown namespace for the cache", a Warning event, at every
// poll until the task's timeout, then TimedOut (refunded); a render that finished is never
// read, and nothing is submitted again. The fix: a handle in the task's namespace, when the
// backend now runs Jobs elsewhere, is reported lost like any other moved handle (the
// other moves of backend_namespace_moved_test.go), so the stage is submitted again where Jobs run now, and its old Job is
// deleted there by its labels (deleteMoved, backend_old_job_deleted_test.go).
var _ = Describe("A Job namespace set since the Job was made, behind the manager's cache", func() {
	It("does not fail every look at the stage in the cache until the task's timeout", func() {
		ns := newNamespace()
		task := newTask(ns, "moved")
		w := workFor(task, videogenv1alpha1.StageRender)
		handle, err := newBackend(k8sClient, "").Submit(ctx, w) // namespace "": the task's
		Expect(err).NotTo(HaveOccurred())

		jobsNS := newNamespace()
		config, err := jobbackend.ParseConfig([]byte(jobtest.Config))
		Expect(err).NotTo(HaveOccurred())
		config.Namespace = jobsNS
		informers, err := cache.New(cfg, cache.Options{Scheme: env.Scheme, ByObject: config.CacheByObject()})
		Expect(err).NotTo(HaveOccurred())
		cacheCtx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		go func() {
			defer GinkgoRecover()
			Expect(informers.Start(cacheCtx)).To(Succeed())
		}()
		Expect(informers.WaitForCacheSync(ctx)).To(BeTrue())
		cached, err := client.New(cfg, client.Options{Scheme: env.Scheme, Cache: &client.CacheOptions{Reader: informers}})
		Expect(err).NotTo(HaveOccurred())
		after, err := jobbackend.New(cached, config)
		Expect(err).NotTo(HaveOccurred())
		// The informers for Jobs start on the first read: let that one happen first.
		_ = cached.List(ctx, &batchv1.JobList{}, client.InNamespace(jobsNS))

		_, err = after.Observe(ctx, w, handle)
		Expect(err).To(HaveOccurred())
		Expect(generation.IsPermanent(err)).To(BeTrue(), "retried as an outage at every poll until the task's timeout: %v", err)
		Expect(generation.IsLost(err)).To(BeTrue(), "%v", err)

		again, err := after.Submit(ctx, w)
		Expect(err).NotTo(HaveOccurred())
		Expect(again).To(HavePrefix(jobsNS + "/"))
		Eventually(func(g Gomega) {
			var job batchv1.Job
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(getJobKey(handle)), &job)
			g.Expect(err != nil || job.DeletionTimestamp != nil).To(BeTrue(), "the first Job still runs in %s", ns)
		}).Should(Succeed())
	})
})

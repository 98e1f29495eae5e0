package controllers_test

import (
	"context"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/jobbackend"
	"github.com/videogen-dev/videogen-operator/internal/jobtest"
)

// The VideoTask controller with the real Kubernetes Job backend: the test plays the Job
// controller (envtest runs none) by writing the Jobs' status.
var _ = Describe("VideoTasks on the Kubernetes Job backend", func() {
	var (
		stop        func()
		afterSubmit func(generation.Work) // runs once a Job was created, before the status is written
	)
	BeforeEach(func() {
		cfg, err := jobbackend.ParseConfig([]byte(jobtest.Config))
		Expect(err).NotTo(HaveOccurred())
		jobs, err := jobbackend.New(k8sClient, cfg)
		Expect(err).NotTo(HaveOccurred())
		afterSubmit = func(generation.Work) {}
		opts := testOptions(nil)
		backend := &hookedBackend{Backend: jobs, after: func(w generation.Work) { afterSubmit(w) }}
		opts.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "jobs", Backend: backend}}
		stop = startManager(opts)
	})
	AfterEach(func() { stop() })

	// stageJob waits for the Job the backend made for a task's stage.
	stageJob := func(ns, task string, stage videogenv1alpha1.StageName) *batchv1.Job {
		var job batchv1.Job
		Eventually(func(g Gomega) {
			var list batchv1.JobList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns),
				client.MatchingLabels{jobbackend.LabelTask: task, jobbackend.LabelStage: string(stage)})).To(Succeed())
			g.Expect(list.Items).To(HaveLen(1))
			job = list.Items[0]
		}).Should(Succeed())
		return &job
	}

	It("fails and refunds a task whose Job fails", func() {
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(25).Create()
		task := aShortTask(ns, tmpl).Create()
		job := stageJob(ns, task.Name, videogenv1alpha1.StageAnalyze)
		Expect(job.OwnerReferences).To(ContainElement(HaveField("UID", task.UID)))
		// The suite's tasks time out after a minute: with the grace, the Job ends within two
		// minutes (not the config's 1800 s), though its delete were lost.
		Expect(*job.Spec.ActiveDeadlineSeconds).To(BeNumerically("<=", 120))
		suite.ExpectBalanced(ns, 75, 25, 0)

		Expect(jobtest.Fail(ctx, k8sClient, job, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit")).To(Succeed())
		done := finished(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		Expect(done.Status.Error.Code).To(Equal("analyze_failed"))
		Expect(done.Status.Error.Message).To(ContainSubstring("BackoffLimitExceeded"))
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
		suite.ExpectBalanced(ns, 100, 0, 0)
	})

	It("deletes the running Job of a task that is cancelled, and refunds it", func() {
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(25).Create()
		task := aShortTask(ns, tmpl).Create()
		job := stageJob(ns, task.Name, videogenv1alpha1.StageAnalyze)

		patch := client.MergeFrom(task.DeepCopy())
		task.Annotations = map[string]string{videogenv1alpha1.AnnotationCancelRequested: "true"}
		Expect(k8sClient.Patch(ctx, task, patch)).To(Succeed())
		Expect(finished(ns, task.Name).Status.Error.Code).To(Equal("canceled"))
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
		}).Should(Satisfy(apierrors.IsNotFound))
		suite.ExpectBalanced(ns, 100, 0, 0)
	})

	// The cancel request lands between the Job's creation and the status write that would
	// record its handle, so that write conflicts and the handle is lost: the Job must still go.
	It("deletes a Job whose handle never reached the status when the task is cancelled", func() {
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(25).Create()
		var once sync.Once
		afterSubmit = func(w generation.Work) {
			if w.Namespace != ns {
				return // earlier specs' open tasks are routed here too: only this spec's is cancelled
			}
			once.Do(func() {
				defer GinkgoRecover()
				var task videogenv1alpha1.VideoTask
				Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: w.Task}, &task)).To(Succeed())
				patch := client.MergeFrom(task.DeepCopy())
				task.Annotations = map[string]string{videogenv1alpha1.AnnotationCancelRequested: "true"}
				Expect(k8sClient.Patch(ctx, &task, patch)).To(Succeed())
			})
		}
		task := aShortTask(ns, tmpl).Create()
		done := finished(ns, task.Name)
		Expect(done.Status.Error.Code).To(Equal("canceled"))
		Expect(done.Status.Stages).To(ContainElement(SatisfyAll(
			HaveField("Name", videogenv1alpha1.StageAnalyze), HaveField("Handle", BeEmpty()))), "the handle was meant to be lost")
		Eventually(func(g Gomega) {
			var list batchv1.JobList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{jobbackend.LabelTask: task.Name})).To(Succeed())
			g.Expect(list.Items).To(BeEmpty())
		}).Should(Succeed())
		suite.ExpectBalanced(ns, 100, 0, 0)
	})
})

// hookedBackend calls after once Submit succeeded.
type hookedBackend struct {
	generation.Backend
	after func(generation.Work)
}

func (b *hookedBackend) Submit(ctx context.Context, w generation.Work) (string, error) {
	h, err := b.Backend.Submit(ctx, w)
	if err == nil {
		b.after(w)
	}
	return h, err
}

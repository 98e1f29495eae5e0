package controllers_test

import (
	"context"
	"errors"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/jobbackend"
	"github.com/videogen-dev/videogen-operator/internal/jobtest"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// Job stages whose backend is gone, moved or out during a reroute.
var _ = Describe("Job stages whose Job backend is gone", func() {
	var (
		ns   string
		l    *ledger.Ledger
		jobs *jobbackend.Backend
	)
	BeforeEach(func() {
		ns = accountWithoutController(100)
		var stop func()
		l, stop = startLedger()
		DeferCleanup(stop)
		cfg, err := jobbackend.ParseConfig([]byte(jobtest.Config))
		Expect(err).NotTo(HaveOccurred())
		jobs, err = jobbackend.New(k8sClient, cfg)
		Expect(err).NotTo(HaveOccurred())
	})
	stageJobs := func(task *videogenv1alpha1.VideoTask) []batchv1.Job {
		var list batchv1.JobList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{jobbackend.LabelTaskUID: string(task.UID)})).To(Succeed())
		return list.Items
	}

	// Interleaving:
	// 1. the Job backend "gpu" serves video.short; a task's analyze runs in a Job. 2. The
	// platform team takes "gpu" out of the backends config and video.short with it (a
	// capability withdrawn for a while: no backend serves it; a ConfigMap edit and a restart,
	// as the reroute specs have them). 3. The task's owner cancels it (POST /v1/tasks/{id}/cancel),
	// or it times out. advance finds no route, and cancelRunningStages finds no backend to
	// stop the analyze at (stageAt: none under its name): the stage is only marked Canceled,
	// the task ends Canceled and is refunded. Nothing deletes the Job (cancelRecorded and
	// rerouteStage do, by its labels; this path did not): it holds its GPU node,
	// unpaid, for the rest of the task's timeout plus a minute (activeDeadlineSeconds), for a
	// task its user was told is cancelled and refunded. The fix: cancelRunningStages deletes
	// the Job of a stage its Job backend no longer stops, by its labels (deleteOrphanedJob), as
	// the other paths do. Failed before the fix with the Job still there.
	It("deletes the Job of a task cancelled after its Job backend and its capability were taken out of the config", func() {
		before := directReconciler(k8sClient, l, jobs)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu", Backend: jobs}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageAnalyze).Handle).NotTo(BeEmpty())
		}).Should(Succeed())
		Expect(stageJobs(task)).To(HaveLen(1))

		other := newRouteBackend("gpu-eraser", nil, "")
		after := directReconciler(k8sClient, l, other)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityEraser: generation.Named{Name: "gpu-eraser", Backend: other}}
		requestCancel(task)
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		ended := taskOf(ns, task.Name)
		Expect(ended.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		Expect(ended.Status.Error).NotTo(BeNil())
		Expect(ended.Status.Error.Code).To(Equal("canceled"))
		suite.ExpectBalanced(ns, 100, 0, 0)
		var left []string
		for _, j := range stageJobs(task) {
			left = append(left, j.Name)
		}
		Expect(left).To(BeEmpty(), "the cancelled task's Job runs on, unpaid, to its deadline")
	})

	// Interleaving:
	// 1. the Job backend "gpu-a100" (its Jobs in each task's namespace) serves video.short; a
	// task's analyze runs in a Job there. 2. The platform team moves the capability to another
	// Job backend, "gpu-h100", whose Jobs run in a namespace of their own (its own configFile,
	// namespace: videogen-jobs), and takes gpu-a100 out of the config (a node pool replaced: one
	// ConfigMap edit, a restart). 3. The analyze is rerouted: no backend under its name can stop
	// it, and deleteOrphanedJob leaves it to the new backend because that is a Job backend
	// ("one renamed follows its Job by name"); but gpu-h100 makes its Jobs in videogen-jobs and
	// never meets the one in the task's namespace: the analyze runs twice. What the user sees:
	// nothing wrong (the task goes on at gpu-h100, charged once); the gpu-a100 Job holds its
	// node, unpaid, to its activeDeadlineSeconds (the task's timeout plus a minute). The fix:
	// the Job is left only to a Job backend that would make that very Job (same namespace and
	// name: jobbackend's Follows), and deleted by its labels otherwise. Failed before the fix
	// with the gpu-a100 Job still there.
	It("deletes the Job of a stage moved to a Job backend that runs its Jobs in another namespace", func() {
		jobsNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "videogen-jobs-"}}
		Expect(k8sClient.Create(ctx, jobsNS)).To(Succeed())
		cfg, err := jobbackend.ParseConfig([]byte(jobtest.Config + "namespace: " + jobsNS.Name + "\n"))
		Expect(err).NotTo(HaveOccurred())
		h100, err := jobbackend.New(k8sClient, cfg)
		Expect(err).NotTo(HaveOccurred())

		before := directReconciler(k8sClient, l, jobs)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-a100", Backend: jobs}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageAnalyze).Handle).NotTo(BeEmpty())
		}).Should(Succeed())
		Expect(stageJobs(task)).To(HaveLen(1))

		after := directReconciler(k8sClient, l, h100)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-h100", Backend: h100}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			an := stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageAnalyze)
			g.Expect(an.Backend).To(Equal("gpu-h100"))
			g.Expect(an.Handle).To(HavePrefix(jobsNS.Name + "/"))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		var left []string
		for _, j := range stageJobs(task) {
			left = append(left, j.Name)
		}
		Expect(left).To(BeEmpty(), "the gpu-a100 Job runs on beside the gpu-h100 one, unpaid, to its deadline")
	})

	// Checked, holds (a guard on the fix above): a Job backend only renamed, its Jobs in the
	// same namespace, still meets the Job it made under the stage's key and follows it.
	It("keeps the Job of a Job backend renamed with the same namespace", func() {
		before := directReconciler(k8sClient, l, jobs)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-a100", Backend: jobs}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageAnalyze).Handle).NotTo(BeEmpty())
		}).Should(Succeed())
		uid := stageJobs(task)[0].UID
		cfg, err := jobbackend.ParseConfig([]byte(jobtest.Config))
		Expect(err).NotTo(HaveOccurred())
		renamed, err := jobbackend.New(k8sClient, cfg) // another Backend value, same config
		Expect(err).NotTo(HaveOccurred())
		after := directReconciler(k8sClient, l, renamed)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-jobs", Backend: renamed}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageAnalyze).Backend).To(Equal("gpu-jobs"))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		now := stageJobs(task)
		Expect(now).To(HaveLen(1))
		Expect(now[0].UID).To(Equal(uid), "the Job was deleted and made again")
	})
})

// flakyRoute is a routeBackend that, while down, answers no look and no cancel (a transient
// outage: a rollout of its server, a network blip).
type flakyRoute struct {
	*routeBackend
	mu   sync.Mutex
	down bool
}

func (f *flakyRoute) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *flakyRoute) isDown() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down
}

func (f *flakyRoute) Observe(ctx context.Context, w generation.Work, h string) (generation.Observation, error) {
	if f.isDown() {
		return generation.Observation{}, errors.New(f.name + ": connection refused")
	}
	return f.routeBackend.Observe(ctx, w, h)
}

func (f *flakyRoute) Cancel(ctx context.Context, w generation.Work, h string) error {
	if f.isDown() {
		return errors.New(f.name + ": connection refused")
	}
	return f.routeBackend.Cancel(ctx, w, h)
}

var _ = Describe("A reroute while the old backend is out", func() {
	// Checked, holds: charged once. Interleaving: 1. video.short is
	// routed to gpu-a; a task's render runs there and finishes (succeeded at gpu-a, not yet
	// looked at). 2. video.short is moved to gpu-b (gpu-a kept for video.eraser) and the
	// manager restarted, while gpu-a is out for a moment (its own rollout). 3. The reroute's
	// look at gpu-a (finishedAt) fails, so the render is taken for unfinished: its cancel at
	// gpu-a fails too (counted as a reroute, it may have landed), and it is submitted to gpu-b
	// under K-r1, where it runs again. What the user sees: the task succeeds with gpu-b's video,
	// charged once (20 points); the render gpu-a finished is wasted work, the service's cost,
	// as any reroute of a running render is. Not fixed: telling an outage of gpu-a from gpu-a
	// gone for good needs a wait of some length before every reroute whose look fails (state
	// the status does not keep), and a task whose old backend is gone for good would wait for
	// it instead of running at the backend that serves it now.
	It("runs again at the new backend a render finished at the old one it could not look at, charged once", func() {
		ns, l := accountWithALedger(100)
		a := &flakyRoute{routeBackend: newGPU("a")}
		b := newGPU("b")
		a.setRender(generation.Running)
		first := directReconciler(k8sClient, l, a)
		first.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-a", Backend: a}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, first, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Handle).NotTo(BeEmpty())
		}).Should(Succeed())
		renderKey := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageRender)

		a.setRender(generation.Succeeded) // step 1: finished, not looked at
		a.setDown(true)                   // step 2
		after := directReconciler(k8sClient, l, b)
		after.Backends = generation.Routes{
			videogenv1alpha1.CapabilityShort:  generation.Named{Name: "gpu-b", Backend: b},
			videogenv1alpha1.CapabilityEraser: generation.Named{Name: "gpu-a", Backend: a},
		}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%+v", done.Status.Error)
		Expect(done.Status.Result.URL).To(Equal("https://media.example/gpu-b/" + task.Name + ".mp4"))
		Expect(b.submitsOf(generation.ReroutedKey(renderKey, 1))).To(Equal(1), "run again at gpu-b")
		suite.ExpectBalanced(ns, 80, 0, 20)
		a.setDown(false)
		for range 3 { // later reconciles (a resync, a late event) charge nothing more
			reconcileOnce(Default, after, task)
		}
		suite.ExpectBalanced(ns, 80, 0, 20)
	})
})

// restart makes b forget every stage it runs, as a worker that keeps them in memory does when
// it restarts: a look at one is answered lost.
func restart(b *routeBackend) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.submits = map[string]int{}
}

var _ = Describe("A stage lost before its reroute", func() {
	// Interleaving: 1. video.short is
	// routed to gpu-a; a task's analyze runs there. 2. gpu-a restarts twice while it runs (two
	// rollouts of the worker, or a crash loop that ends): the analyze is lost and submitted
	// again each time (resubmissions 2 of 2). 3. video.short is moved to gpu-b (gpu-a kept for
	// video.eraser) and the manager restarted: the analyze is stopped at gpu-a and rerouted to
	// gpu-b, which runs it. 4. gpu-b restarts once (its own rollout) and loses it. The reroute
	// kept the count gpu-a ran up, so gpu-b's first loss is over maxResubmissions: the task
	// fails "the backend lost the analyze stage 3 times (it may have restarted)", refunded, at a
	// backend that lost it once, and would have run it again as gpu-a did. maxResubmissions
	// bounds a backend that keeps losing a stage; rerouteStage says a reroute is not a loss,
	// and a new backend has lost nothing yet. The fix: a reroute starts the stage's
	// resubmissions afresh. Failed before the fix with the task failed "lost 3 times".
	It("gives a stage rerouted to another backend its resubmissions afresh", func() {
		ns, l := accountWithALedger(100)
		a := newGPU("a")
		b := newGPU("b")
		a.setAnalyze(generation.Running)
		b.setAnalyze(generation.Running)
		first := directReconciler(k8sClient, l, a)
		first.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-a", Backend: a}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, first, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageAnalyze).Handle).NotTo(BeEmpty())
		}).Should(Succeed())
		for n := int32(1); n <= 2; n++ { // step 2
			restart(a)
			Eventually(func(g Gomega) {
				reconcileOnce(g, first, task)
				g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageAnalyze).Resubmissions).To(Equal(n))
			}).WithTimeout(10 * time.Second).Should(Succeed())
		}

		after := directReconciler(k8sClient, l, b) // step 3
		after.Backends = generation.Routes{
			videogenv1alpha1.CapabilityShort:  generation.Named{Name: "gpu-b", Backend: b},
			videogenv1alpha1.CapabilityEraser: generation.Named{Name: "gpu-a", Backend: a},
		}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			an := stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageAnalyze)
			g.Expect(an.Backend).To(Equal("gpu-b"))
			g.Expect(an.Handle).NotTo(BeEmpty())
		}).WithTimeout(10 * time.Second).Should(Succeed())

		restart(b) // step 4
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			now := taskOf(ns, task.Name)
			g.Expect(now.Status.Phase == videogenv1alpha1.TaskFailed || stageOf(now, videogenv1alpha1.StageAnalyze).Resubmissions == 1).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		now := taskOf(ns, task.Name)
		Expect(now.Status.Phase).To(Equal(videogenv1alpha1.TaskRunning), "%+v", now.Status.Error)
		Expect(b.submitsOf(generation.ReroutedKey(generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageAnalyze), 1))).To(Equal(1))
	})
})

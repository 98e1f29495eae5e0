package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/jobbackend"
	"github.com/videogen-dev/videogen-operator/internal/jobtest"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// A stage's reroutes when its backend changes kind, name or server.
var _ = Describe("Backends and reroutes", func() {
	// Interleaving: 1. video.short is routed to gpu-a; a task's render runs there under its plain
	// key K. 2. gpu-a is taken out of the backends config altogether (video.short moved to gpu-b)
	// and the manager restarted: the render is rerouted without a cancel (no backend is configured
	// to send it to; gpu-a the server runs on), so it keeps K and runs at gpu-b under K. 3. The
	// change is rolled back (gpu-a back for video.short, gpu-b kept for video.eraser) and the
	// manager restarted: the render is rerouted again, cancelled at gpu-b (reroutes 1) and
	// submitted at gpu-a under K-r1. gpu-a now runs the render twice: K (from step 1, never
	// stopped) and K-r1. Each step is a ConfigMap edit and a restart, as
	// videotask_routes_restart_test.go has it. What the user sees: nothing wrong (checked: the task
	// succeeds with gpu-a's K-r1 video and is charged once, 20 points); the service pays a second
	// render at gpu-a, K, which runs unpaid to its deadline (the task's timeout plus a minute),
	// holding a GPU from paying tasks. The fix: a stage submitted to a backend under a rerouted key
	// first stops there, by key, the keys it ran under before (K … K-r<N-1>), any of which that
	// backend may still run from a time it was configured and the stage could not be stopped at it.
	It("stops the plain key's render left at a backend removed and re-added", func() {
		ns, l := accountWithALedger(100)
		a := newGPU("a")
		b := newGPU("b")
		a.setRender(generation.Running)
		b.setRender(generation.Running)
		first := directReconciler(k8sClient, l, a)
		first.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-a", Backend: a}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, first, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Backend).To(Equal("gpu-a"))
		}).Should(Succeed())
		renderKey := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageRender)

		removed := directReconciler(k8sClient, l, b) // gpu-a configured nowhere
		removed.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-b", Backend: b}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, removed, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Backend).To(Equal("gpu-b"))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Reroutes).To(BeZero())
		Expect(a.canceledKey(renderKey)).To(BeFalse(), "nothing could reach gpu-a")

		back := directReconciler(k8sClient, l, a)
		back.Backends = generation.Routes{
			videogenv1alpha1.CapabilityShort:  generation.Named{Name: "gpu-a", Backend: a},
			videogenv1alpha1.CapabilityEraser: generation.Named{Name: "gpu-b", Backend: b},
		}
		Eventually(func(g Gomega) {
			reconcileOnce(g, back, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Backend).To(Equal("gpu-a"))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(a.submitsOf(generation.ReroutedKey(renderKey, 1))).To(Equal(1))
		Expect(a.canceledKey(renderKey)).To(BeTrue(), "gpu-a runs the render twice: K, unpaid, beside K-r1")

		a.setRender(generation.Succeeded)
		Eventually(func(g Gomega) {
			reconcileOnce(g, back, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%+v", done.Status.Error)
		Expect(done.Status.Result.URL).To(Equal("https://media.example/gpu-a/" + task.Name + ".mp4"))
		suite.ExpectBalanced(ns, 80, 0, 20)
	})

	// Interleaving: 1. the backend "gpu" is a Job backend serving video.short; a task's analyze
	// runs in a Job (handle namespace/name, server "job"). 2. The platform team replaces "gpu" by
	// an http backend under the same name (a ConfigMap edit kept small) and restarts the manager.
	// 3. The new manager reroutes the analyze to the http server: no Job backend is configured to
	// stop the Job, so nothing does. What the user sees: nothing wrong (the task succeeds at the
	// http server, charged once); the Job holds its GPU node, unpaid, to its activeDeadlineSeconds
	// (the task's timeout plus a minute). The manager may delete Jobs by label in any namespace
	// (deletecollection, as the Job backend's moved handles use): the fix deletes the stage's own
	// Jobs (its task UID and stage labels, never by the name the handle gives) in the namespace the
	// handle names, when a stage recorded at server "job" is rerouted and no Job backend under its
	// name can stop it.
	It("deletes the Job of a stage rerouted from a Job backend to an http one under the same name", func() {
		ns, l := accountWithALedger(100)
		cfg, err := jobbackend.ParseConfig([]byte(jobtest.Config))
		Expect(err).NotTo(HaveOccurred())
		jobs, err := jobbackend.New(k8sClient, cfg)
		Expect(err).NotTo(HaveOccurred())
		worker := newNumberingWorker(nil)
		DeferCleanup(worker.Close)
		hb := clientOf(worker.URL)

		before := directReconciler(k8sClient, l, jobs)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu", Backend: jobs}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageAnalyze).Handle).NotTo(BeEmpty())
		}).Should(Succeed())
		stageJobs := func() []batchv1.Job {
			var list batchv1.JobList
			Expect(k8sClient.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{jobbackend.LabelTaskUID: string(task.UID)})).To(Succeed())
			return list.Items
		}
		Expect(stageJobs()).To(HaveLen(1))

		after := directReconciler(k8sClient, l, hb)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu", Backend: hb}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded))
		suite.ExpectBalanced(ns, 80, 0, 20)
		Expect(stageJobs()).To(BeEmpty(), "the analyze's Job runs on, unpaid, to its deadline")
	})

	// A stage recorded
	// before stages[].server existed has none, which sameServer takes for "whatever is
	// configured under the name now". Interleaving: 1. an older manager (before stages[].server)
	// runs task X's render at "worker" (http url A) as stg-2; its status has no server. 2. The
	// manager is upgraded, and "worker" is pointed at another server B (url B) in the same
	// rollout, or in any later one before X's stage is looked at again (the common case,
	// a later rollout, is what this spec checks). B numbers its stages too, echoes no key
	// (optional in the protocol) and runs another account's task Y as stg-1/stg-2. What the
	// user sees: X's render, taken for B's, is observed at B under stg-2 and X gets Y's
	// video, charged (videotask_reroute_test.go's "a backend's server changes under the same name", back for every stage started before the upgrade).
	// The fix: a stage without a server records the server it is looked at (and answered by)
	// under its name, at its first look by a manager that records servers; a url changed in a
	// later rollout is then seen, and the stage rerouted. What stays (not fixable from the
	// status: nothing says which server issued the id): a url changed in the very rollout that
	// upgrades the manager, at a server that echoes no key.
	It("records the server of a stage recorded without one, so that a later url change is seen", func() {
		ns, l := accountWithALedger(100)
		workerA := newNumberingWorker(map[videogenv1alpha1.StageName]string{videogenv1alpha1.StageRender: "running"})
		DeferCleanup(workerA.Close)
		workerB := newNumberingWorker(nil)
		DeferCleanup(workerB.Close)
		clientA := clientOf(workerA.URL)
		clientB := clientOf(workerB.URL)
		runAnotherAccountsTask(clientB)

		before := directReconciler(k8sClient, l, clientA)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "worker", Backend: clientA}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Handle).To(Equal("stg-2"))
		}).Should(Succeed())
		// Step 1: the status as an older manager wrote it, without servers.
		Eventually(func(g Gomega) {
			old := taskOf(ns, task.Name)
			for i := range old.Status.Stages {
				old.Status.Stages[i].Server = ""
			}
			g.Expect(k8sClient.Status().Update(ctx, old)).To(Succeed())
		}).Should(Succeed())
		// Step 2: the upgraded manager looks at the render once, at url A.
		reconcileOnce(Default, before, task)
		Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))

		after := directReconciler(k8sClient, l, clientB) // a later rollout: url B
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "worker", Backend: clientB}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Result).NotTo(BeNil(), "%+v", done.Status)
		Expect(done.Status.Result.URL).To(Equal("https://media.example/"+task.Name+".mp4"), "the task was given another task's video")
	})
})

// The Job backend's stages once no Job backend is configured under their name.
var _ = Describe("A Job stage whose Job backend is gone", func() {
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
	startAt := func(name string) *videogenv1alpha1.VideoTask {
		before := directReconciler(k8sClient, l, jobs)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: name, Backend: jobs}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			now := taskOf(ns, task.Name)
			g.Expect(stageOf(now, videogenv1alpha1.StageAnalyze).Handle).NotTo(BeEmpty())
			g.Expect(now.Finalizers).To(ContainElement(videogenv1alpha1.FinalizerCancelWork))
		}).Should(Succeed())
		Expect(stageJobs(task)).To(HaveLen(1))
		return task
	}

	// Interleaving: as above, "gpu" turns from a Job backend into an http one under its name and
	// the manager restarts; the task's owner deletes it before the new manager reconciled it (a
	// restart takes seconds to minutes; a delete meanwhile is any user's). finalize (cancelUnended)
	// asks the http server to stop the stage by its key, and nothing stops the Job: it holds its
	// GPU node, unpaid, to its activeDeadlineSeconds for a task that is gone. The fix: finalize
	// deletes it by its labels as a reroute does. Failed before the fix with "the deleted task's
	// Job runs on".
	It("deletes the Job of a task deleted after its Job backend became an http one", func() {
		task := startAt("gpu")
		worker := newNumberingWorker(map[videogenv1alpha1.StageName]string{videogenv1alpha1.StageAnalyze: "running"})
		DeferCleanup(worker.Close)
		hb := clientOf(worker.URL)
		Expect(k8sClient.Delete(ctx, taskOf(ns, task.Name))).To(Succeed())

		after := directReconciler(k8sClient, l, hb)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu", Backend: hb}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "still there: %v", err)
		}).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(stageJobs(task)).To(BeEmpty(), "the deleted task's Job runs on")
	})

	// Checked, holds (a guard on the fix above): a Job backend renamed, "gpu" to "gpu-jobs"
	// (same Jobs namespace), reroutes its stages without a cancel (no backend is configured
	// under the old name) and submits them under the same key: the Job backend meets the Job
	// it made (same name) and follows it. Deleting orphaned Jobs must not take it for one: the
	// analyze would start over or, with the delete still under way when the Submit meets the
	// Job, be "deleted before the stage finished" and fail the task.
	It("keeps the Job of a Job backend only renamed", func() {
		task := startAt("gpu")
		uid := stageJobs(task)[0].UID
		after := directReconciler(k8sClient, l, jobs)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-jobs", Backend: jobs}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageAnalyze).Backend).To(Equal("gpu-jobs"))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		now := stageJobs(task)
		Expect(now).To(HaveLen(1))
		Expect(now[0].UID).To(Equal(uid), "the Job was deleted and made again")
		Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))
	})
})

// A stage
// recorded without a server now records it at its next look; a succeeded analyze is never
// looked at again, so one that succeeded before the upgrade keeps no server for good, which
// analyzedElsewhere takes for "whatever is configured under the name now". Interleaving: 1. an
// older manager runs task X at "worker" (url A, the reference worker): its analyze succeeded there
// (outputs in A's format), its render runs there; no server in the status. 2. The manager is
// upgraded; its first look at the render records url A. 3. A later rollout points "worker" at
// server B, another implementation (a third-party model server replacing the reference worker under
// the same name, as videotask_reroute_test.go has it) whose render needs its own analyze's
// previous.face_track. 4. The render is rerouted to B (its server differs), and handed A's analyze
// outputs, since the analyze is taken for B's. What the user sees: B refuses (422) and the task
// fails "the render stage was refused: previous.face_track is required…", refunded, blaming an
// input the caller never sent (a server that does not check renders from outputs it cannot read: a
// wrong video, charged). The fix: a stage whose server is recorded so records it on the other
// stages of its task recorded under the same name without one (the analyze whose outputs it was
// handed ran at the same server, as sameServer assumed when it handed them). Failed before the fix
// with the task failed "the render stage was refused".
var _ = Describe("An analyze recorded without a server", func() {
	It("is analyzed again at the render's new server after a url change", func() {
		ns, l := accountWithALedger(100)
		workerA := newNumberingWorker(map[videogenv1alpha1.StageName]string{videogenv1alpha1.StageRender: "running"})
		DeferCleanup(workerA.Close)
		workerB := newRefusingWorker()
		DeferCleanup(workerB.Close)
		clientA := clientOf(workerA.URL)
		clientB := clientOf(workerB.URL)

		before := directReconciler(k8sClient, l, clientA)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "worker", Backend: clientA}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Handle).NotTo(BeEmpty())
		}).Should(Succeed())
		Eventually(func(g Gomega) { // step 1: as an older manager wrote it
			old := taskOf(ns, task.Name)
			for i := range old.Status.Stages {
				old.Status.Stages[i].Server = ""
			}
			g.Expect(k8sClient.Status().Update(ctx, old)).To(Succeed())
		}).Should(Succeed())
		reconcileOnce(Default, before, task) // step 2
		Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Server).To(Equal(clientA.Server()))

		after := directReconciler(k8sClient, l, clientB) // step 3
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "worker", Backend: clientB}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%+v", done.Status.Error)
		suite.ExpectBalanced(ns, 80, 0, 20)
	})
})

package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// Adversarial round 22: a task's two stages, between them and at their ends.
var _ = Describe("Adversarial round 22: a task's two stages", func() {
	var (
		l          *ledger.Ledger
		stopLedger func()
		ns         string
	)
	BeforeEach(func() {
		ns = accountWithoutController(100)
		l, stopLedger = startLedger()
		DeferCleanup(stopLedger)
	})

	// What breaks: a backend answers a render "succeeded" without a result (a worker that
	// lost its upload, a third-party server's bug; any server speaking the protocol may). The
	// task ends Failed (render_failed, "reported success without a result") and is refunded,
	// but its render stage was written Succeeded at 100%, and the task's progress 100: the
	// status says the render succeeded while the task failed for that very render. Reachable
	// in one look. The user (kubectl get -o yaml, GET /v1/tasks/{id}'s stages) sees a
	// succeeded render on a failed task, and a dashboard counting stage outcomes counts it.
	It("does not write the render Succeeded when its success came without a result", func() {
		backend := &answerBackend{Backend: testbackend.New()}
		r := directReconciler(k8sClient, l, backend)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		b := aShortTask(ns, tmpl).Timeout(time.Hour)
		backend.Set(b.Name(), testbackend.Script{})
		backend.setStage(videogenv1alpha1.StageRender, &generation.Observation{State: generation.Succeeded, Progress: 100})
		task := b.Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := finished(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
		Expect(done.Status.Error.Code).To(Equal("render_failed"))
		for _, st := range done.Status.Stages {
			if st.Name == videogenv1alpha1.StageRender {
				Expect(st.State).To(Equal(videogenv1alpha1.StageFailed), "the render stage of a task failed for its render: %+v", st)
			}
		}
		Expect(done.Status.Progress).To(BeNumerically("<", 100), "a failed task at 100%%")
	})

	// Checked, holds: the task's timeout falls between its analyze stage's success and its
	// render's submission. Interleaving: the analyze stage runs (Hang); the task's deadline
	// passes; the next look finds analyze succeeded. Reachable: a slow analyze on a short
	// spec.timeout, or a manager that was down across the deadline. The render must not be
	// started for a task that ends TimedOut and is refunded; a render submitted by an earlier
	// reconcile whose status write was lost is stopped by its key.
	It("Checked, holds: ends TimedOut, refunded, without running the render, when analyze is seen done past the deadline", func() {
		backend := &answerBackend{Backend: testbackend.New()}
		r := directReconciler(k8sClient, l, backend)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		b := aShortTask(ns, tmpl).Timeout(time.Minute)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))
		}).Should(Succeed())
		created := taskOf(ns, task.Name).CreationTimestamp.Time
		r.Clock = clocktesting.NewFakePassiveClock(created.Add(2 * time.Minute))
		backend.setStage(videogenv1alpha1.StageAnalyze, &generation.Observation{State: generation.Succeeded, Progress: 100,
			Outputs: map[string]string{"face_box": "[1,2,3,4]"}})
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := finished(ns, task.Name)
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
		Expect(done.Status.Error.Code).To(Equal("timed_out"))
		render := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageRender)
		Expect(backend.Submits(render)).To(BeZero(), "a render started for a task that timed out")
		Expect(backend.WasCanceled(render)).To(BeTrue(), "a render an earlier lost write may have started is not stopped")
	})
})

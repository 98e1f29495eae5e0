package controllers_test

import (
	"context"
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/taskview"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// The task's life (two stages, a stage lost, a timeout or a cancel).
var _ = Describe("A task's life", func() {
	var (
		l          *ledger.Ledger
		stopLedger func()
		backend    *downBackend
		ns         string
	)
	BeforeEach(func() {
		ns = accountWithoutController(100)
		l, stopLedger = startLedger()
		DeferCleanup(stopLedger)
		backend = &downBackend{Backend: testbackend.New()}
	})

	// What breaks: a stage its backend lost is readied to be submitted again (resubmitLost
	// clears its handle and leaves it Running). If that Submit does not get through (the worker
	// is mid-rollout: connection refused), the status is written as it stands: the stage
	// Running without a handle, "backend unavailable". When the task then must stop (the
	// caller cancels it, or its timeout comes), the next reconcile takes advance's "no handle
	// yet" branch: it asks the backend to stop the stage by its key and ends the task Failed,
	// refunded — but never marks the stage Canceled, as every other path that stops a task
	// does. The terminal task says, for good, that its stage runs: GET /v1/tasks/{id} and the
	// completion webhook's body show phase "analyze" and phases[analyze].status "running" for
	// a task that failed and was refunded.
	//
	// Steps, each a real reconcile against envtest: 1. the analyze stage runs (handle h1).
	// 2. The worker restarts (it forgets h1) and refuses connections for a moment: the next
	// reconcile sees the stage lost, submits it again and fails, and writes Running, no
	// handle. 3. The caller cancels (POST /v1/tasks/{id}/cancel), or the timeout passes.
	// 4. The next reconcile ends the task.
	DescribeTable("marks the stage it lost and could not submit again Canceled when the task stops",
		func(stop func(*clocktesting.FakePassiveClock, *videogenv1alpha1.VideoTask), code string) {
			r := directReconciler(k8sClient, l, backend)
			fake := clocktesting.NewFakePassiveClock(timeNow())
			r.Clock = fake
			tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
			b := aShortTask(ns, tmpl).Timeout(time.Minute)
			backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
			task := b.Create()
			Eventually(func(g Gomega) {
				reconcileOnce(g, r, task)
				g.Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))
			}).Should(Succeed())

			backend.Restart()
			backend.setSubmit(func(context.Context) error { return errors.New("connection refused") })
			Eventually(func(g Gomega) { reconcileOnce(g, r, task) }).Should(Succeed())
			lost := taskOf(ns, task.Name)
			Expect(lost.Status.Stages).To(ContainElement(SatisfyAll(
				HaveField("Name", videogenv1alpha1.StageAnalyze), HaveField("State", videogenv1alpha1.StageRunning),
				HaveField("Handle", ""), HaveField("Resubmissions", int32(1)))), "lost, and not submitted again yet")

			stop(fake, task)
			Eventually(func(g Gomega) {
				reconcileOnce(g, r, task)
				g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
			}).Should(Succeed())
			done := taskOf(ns, task.Name)
			Expect(done.Status.Error.Code).To(Equal(code))
			Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
			Expect(backend.cancelAsked(generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageAnalyze))).
				To(BeTrue(), "the backend was asked to stop the stage by its key")
			for _, st := range done.Status.Stages {
				Expect(st.State).NotTo(Equal(videogenv1alpha1.StageRunning), "stage %s of a task that ended %s", st.Name, code)
			}
			view := taskview.Of(done) // what GET /v1/tasks/{id} and the completion webhook show
			Expect(view.Phase).To(BeNil(), "a %s task names no running phase", view.Status)
		},
		Entry("when it is cancelled", func(_ *clocktesting.FakePassiveClock, task *videogenv1alpha1.VideoTask) {
			requestCancel(task)
		}, "canceled"),
		Entry("when it times out", func(fake *clocktesting.FakePassiveClock, _ *videogenv1alpha1.VideoTask) {
			fake.SetTime(fake.Now().Add(2 * time.Minute))
		}, "timed_out"),
	)

	// What breaks: advance asks the backend first, so that "a render that finished wins over a
	// timeout or a cancel request that raced it". A template that goes away mid-task does not
	// get that rule: reconcileActive sees the template missing and, without a look at the
	// stage, cancels it and ends the task Failed, template_unavailable, refunded. When the
	// render had finished at the backend (between two polls, PollInterval apart) the caller is
	// told, in the task and its completion webhook, that nothing could be rendered, while the
	// video exists and the backend spent the work; the operator refunds a render it paid for.
	// docs/api.md promises only that "a task still running on it then fails".
	//
	// Steps: 1. the render stage runs (handle h2). 2. It finishes at the backend. 3. Before the
	// next poll, the caller deletes its template (DELETE /v1/short-templates/{id}, or kubectl
	// delete template). 4. The next reconcile ends the task.
	It("lets a render that finished before its template went away win, as over a cancel or a timeout", func() {
		r := directReconciler(k8sClient, l, backend)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		b := aShortTask(ns, tmpl)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Succeed, Render: testbackend.Hang})
		task := b.Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Stages).To(ContainElement(SatisfyAll(
				HaveField("Name", videogenv1alpha1.StageRender), HaveField("State", videogenv1alpha1.StageRunning))))
		}).Should(Succeed())

		backend.Set(task.Name, testbackend.Script{Analyze: testbackend.Succeed, Render: testbackend.Succeed}) // done at the backend
		Expect(k8sClient.Delete(ctx, &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: tmpl}})).To(Succeed())
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%+v", done.Status.Error)
		Expect(done.Status.Result).NotTo(BeNil())
		Expect(done.Status.Result.URL).To(Equal(testbackend.ResultURL(task.Name)))
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeDeducted))
		Expect(backend.cancelAsked(generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageRender))).
			To(BeFalse(), "a finished render is not cancelled")
	})

	// Checked, holds (and still holds with the fix): a render that still runs when its template
	// goes away is cancelled at the backend and the task refunded, as docs/api.md says.
	It("still stops a render that runs when its template goes away, and refunds it", func() {
		r := directReconciler(k8sClient, l, backend)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		b := aShortTask(ns, tmpl)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Succeed, Render: testbackend.Hang})
		task := b.Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Stages).To(ContainElement(SatisfyAll(
				HaveField("Name", videogenv1alpha1.StageRender), HaveField("State", videogenv1alpha1.StageRunning))))
		}).Should(Succeed())

		Expect(k8sClient.Delete(ctx, &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: tmpl}})).To(Succeed())
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Error.Code).To(Equal("template_unavailable"))
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
		Expect(done.Finalizers).To(BeEmpty())
		Expect(done.Status.Stages).To(ContainElement(SatisfyAll(
			HaveField("Name", videogenv1alpha1.StageRender), HaveField("State", videogenv1alpha1.StageCanceled))))
		Expect(backend.cancelAsked(generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageRender))).To(BeTrue())
	})
})

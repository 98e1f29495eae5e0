package controllers_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// A task's two stages, between them and at their ends.
var _ = Describe("A task's two stages", func() {
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
	// What breaks: the look at a running render that starts just before the task's deadline
	// is bounded by that deadline (callContext), and cut there. Interleaving: the render
	// finishes at the backend; a reconcile starts 50ms before the deadline (a watch event, or
	// a poll that fired a moment early) and asks; the backend, live but slower than 50ms,
	// has not answered when the call is cut. The failed look is judged after it, past the
	// deadline: the task is cancelled and ends TimedOut, refunded, without the last look that
	// a task seen past its deadline gets (CancelTimeout), in which the finished render would
	// have won. Reachable: any backend taking longer to answer than the time left. The user
	// sees "did not finish within its timeout" for a video that was made, and the service
	// throws away (and cancels) work it did, unpaid; a render that finished must win over the
	// timeout, as it does for a look that starts after the deadline.
	It("gives a look cut at the deadline the last look a timed-out task gets, so a finished render wins", func() {
		fake := clocktesting.NewFakePassiveClock(timeNow())
		backend := &straddleBackend{Backend: testbackend.New(), clock: fake}
		r := directReconciler(k8sClient, l, backend)
		r.Clock = fake
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		b := aShortTask(ns, tmpl).Timeout(time.Hour)
		backend.Set(b.Name(), testbackend.Script{Render: testbackend.Hang})
		task := b.Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			running := taskOf(ns, task.Name)
			g.Expect(running.Status.Stages).To(ContainElement(HaveField("Handle", Not(BeEmpty()))))
			for _, st := range running.Status.Stages {
				if st.Name == videogenv1alpha1.StageRender {
					g.Expect(st.State).To(Equal(videogenv1alpha1.StageRunning))
				}
			}
		}).Should(Succeed())

		// The render is done at the backend; the next look starts 50ms before the deadline
		// and the backend takes longer than that to answer.
		deadline := taskOf(ns, task.Name).CreationTimestamp.Add(time.Hour)
		fake.SetTime(deadline.Add(-50 * time.Millisecond))
		backend.straddle(deadline.Add(10 * time.Millisecond))
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := finished(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%+v", done.Status.Error)
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeDeducted))
		Expect(done.Status.Result.URL).To(Equal("https://media.example/done.mp4"))
	})
})

// straddleBackend is the test backend, except that once straddle is called the render is done,
// and the first look at it is slower than the time it is given: it waits for its call's end,
// moves the clock to after (the time the look took), and fails as a cut call does.
type straddleBackend struct {
	*testbackend.Backend
	clock *clocktesting.FakePassiveClock
	mu    sync.Mutex
	after time.Time
	slow  bool
	done  bool
}

func (b *straddleBackend) straddle(after time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.after, b.slow, b.done = after, true, true
}

func (b *straddleBackend) Observe(ctx context.Context, w generation.Work, handle string) (generation.Observation, error) {
	b.mu.Lock()
	slow, done, after := b.slow, b.done, b.after
	if w.Stage == videogenv1alpha1.StageRender {
		b.slow = false
	}
	b.mu.Unlock()
	if w.Stage != videogenv1alpha1.StageRender || !done {
		return b.Backend.Observe(ctx, w, handle)
	}
	if slow {
		<-ctx.Done()
		b.clock.SetTime(after)
		return generation.Observation{}, fmt.Errorf("backend GET /v1/stages/%s: %w", handle, ctx.Err())
	}
	return generation.Observation{State: generation.Succeeded, Progress: 100,
		Result: &videogenv1alpha1.TaskResult{URL: "https://media.example/done.mp4", MediaType: "video/mp4"}}, nil
}

package controllers_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/events"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// A task's acceptance (phase Queued, Accepted, its points frozen) is written with its first
// stage's dispatch. A backend that does not answer must not make it tell its acceptance twice.
var _ = Describe("A new task whose backend is slow to take its first stage", func() {
	var backend *downBackend
	BeforeEach(func() {
		backend = &downBackend{Backend: testbackend.New()}
	})

	It("tells PointsFrozen once when a cancel request cuts its first Submit short", func() {
		ns := accountWithoutController(100)
		l, stopLedger := startLedger()
		DeferCleanup(stopLedger)
		r := directReconciler(k8sClient, l, backend)
		recorder := events.NewFakeRecorder(100)
		r.Recorder = recorder
		var (
			mu       sync.Mutex
			cutShort error // how the first Submit ended
		)
		called := make(chan struct{})
		var submits atomic.Int32
		backend.setSubmit(func(ctx context.Context) error {
			if submits.Add(1) == 1 {
				close(called)
			}
			<-ctx.Done()
			mu.Lock()
			defer mu.Unlock()
			cutShort = ctx.Err()
			return ctx.Err()
		})
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Create()
		Eventually(func() ledger.Standing {
			v, _ := l.View(taskOf(ns, task.Name))
			return v.Standing
		}).ShouldNot(Equal(ledger.Unknown), "the ledger knows the task")

		first := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(first)
			reconcileOnce(Default, r, task)
		}()
		Eventually(called).Should(BeClosed(), "the first Submit is under way")
		requestCancel(task)
		r.InterruptCall(task.UID) // as the cancel request's watch event does
		Eventually(first).Should(BeClosed())
		mu.Lock()
		Expect(cutShort).To(MatchError(context.Canceled), "the cancel request cut the Submit short")
		mu.Unlock()

		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).Should(Succeed())
		Expect(submits.Load()).To(Equal(int32(1)), "a cancelled task is not submitted again")
		done := taskOf(ns, task.Name)
		Expect(done.Status.Error.Code).To(Equal("canceled"))
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
		var frozen []string
		for len(recorder.Events) > 0 {
			if e := <-recorder.Events; strings.HasPrefix(e, "Normal "+videogenv1alpha1.ReasonFrozen) {
				frozen = append(frozen, e)
			}
		}
		Expect(frozen).To(HaveLen(1), "one PointsFrozen event per task")
	})
})

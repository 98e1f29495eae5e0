package controllers_test

import (
	"context"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// Adversarial round 18: what a hostile or buggy backend answers, as the controller stores it.
var _ = Describe("Adversarial: a backend's answers (round 18)", func() {
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

	// What breaks: a backend fails a stage with a long message (the protocol sets no bound;
	// the HTTP client reads up to 1 MiB of an answer): a Python traceback, a tool's whole log,
	// a proxy's HTML page quoted in the message. The controller ends the task Failed with the
	// condition message "the analyze stage failed: <message>", but metav1.Condition's message
	// is at most 32768 bytes in the CRD, so the kube-apiserver refuses that status write (422)
	// every time. The stage keeps reading failed, and the Failed observation is acted on before
	// the task's timeout or cancel is even looked at, so every later reconcile writes the same
	// refused status: the task stays Running, its points frozen, for good, whatever the caller
	// does (cancel, timeout). Every step is reachable: any server speaking the protocol may
	// answer so, and the reference worker's own messages are bounded only by its ffmpeg tail.
	// The user sees a task Running at 0% for ever and a balance short of its price.
	It("ends a task whose backend fails a stage with a message longer than a condition holds", func() {
		backend := &answerBackend{Backend: testbackend.New()}
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

		// The backend fails the stage with 40 KiB of log.
		long := "Traceback (most recent call last):\n" + strings.Repeat("  File \"render.py\", line 42, in <module>\n", 1000)
		backend.set(&generation.Observation{State: generation.Failed, Message: long})
		for range 3 {
			_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		}
		// Neither the caller's cancel nor the timeout helps a task stuck so.
		requestCancel(task)
		fake.SetTime(fake.Now().Add(2 * time.Minute))
		var err error
		for range 3 {
			_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		}
		done := taskOf(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed), "the task is stuck %s: %v", done.Status.Phase, err)
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
		Expect(done.Status.Error.Code).To(Equal("analyze_failed"))
		Expect(done.Status.Error.Message).To(HavePrefix("the analyze stage failed: Traceback (most recent call last):"))
	})
})

// answerBackend is the test backend, except that Observe answers what the test set, if anything.
type answerBackend struct {
	*testbackend.Backend
	mu  sync.Mutex
	obs *generation.Observation
}

func (b *answerBackend) set(obs *generation.Observation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.obs = obs
}

func (b *answerBackend) Observe(ctx context.Context, w generation.Work, handle string) (generation.Observation, error) {
	b.mu.Lock()
	obs := b.obs
	b.mu.Unlock()
	if obs != nil {
		return *obs, nil
	}
	return b.Backend.Observe(ctx, w, handle)
}

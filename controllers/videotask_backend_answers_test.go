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

// What a hostile or buggy backend answers, as the controller stores it.
var _ = Describe("A backend's answers", func() {
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

	// What breaks: a backend's render succeeds with a result the controller takes as it is,
	// however large (the HTTP client reads up to 1 MiB). The controller asks the ledger to
	// charge the task first, and the charge's journal entry carries the result, so that a
	// manager taking over can finish the task from it. Stored, its JSON grows: the
	// kube-apiserver writes '<' as \u003c, six bytes for one (and an invalid UTF-8 byte as a
	// three-byte U+FFFD), so 300 KB of answer is 1.8 MB in the PointAccount: etcd refuses the
	// account write (over 1.5 MiB), and the ledger tries the same write again for ever, with
	// this first entry holding back every entry queued behind it. The task stays Running
	// with its points held, and so does every other task of the namespace that succeeds
	// after it: nothing is charged, no top-up is credited, for good. Every step is reachable:
	// any server speaking the protocol may answer so (a metadata value quoting an HTML page,
	// say). The user sees the namespace's tasks stop finishing and its balance freeze.
	It("does not let one oversized result freeze the namespace's ledger", func() {
		backend := &answerBackend{Backend: testbackend.New()}
		r := directReconciler(k8sClient, l, backend)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		hostile := aShortTask(ns, tmpl).Timeout(time.Hour)
		backend.Set(hostile.Name(), testbackend.Script{})
		backend.result(hostile.Name(), &videogenv1alpha1.TaskResult{URL: "https://media.example/out.mp4", MediaType: "video/mp4",
			Metadata: map[string]string{"log": strings.Repeat("<", 300_000)}})
		bad := hostile.Create()
		other := aShortTask(ns, tmpl).Timeout(time.Hour)
		backend.Set(other.Name(), testbackend.Script{})
		good := other.Create()

		Eventually(func(g Gomega) {
			for _, t := range []*videogenv1alpha1.VideoTask{bad, good} {
				_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(t)})
			}
			g.Expect(taskOf(ns, good.Name).Status.Charge).To(Equal(videogenv1alpha1.ChargeDeducted), "the other task is charged")
			g.Expect(taskOf(ns, bad.Name).Status.Phase.Terminal()).To(BeTrue(), "the task with the oversized result ends")
		}).WithTimeout(20 * time.Second).Should(Succeed())
		done := taskOf(ns, bad.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
		Expect(done.Status.Error.Code).To(Equal("render_failed"))
	})

	// What breaks, as above, for an analyze stage's outputs: they go into the task's status
	// (to be handed to render), so outputs that store over 1.5 MiB make every status write of
	// the task fail: its analyze reads succeeded at each look, the render's Submit (or, at
	// the timeout, the task's end) is written with them, and refused. And a result URL that
	// is not http(s) (javascript:, file:) would be charged for and handed to the caller as
	// the video's URL. Either ends the task Failed, refunded.
	DescribeTable("fails, and refunds, a stage whose backend answers what cannot be kept",
		func(stage videogenv1alpha1.StageName, obs generation.Observation) {
			backend := &answerBackend{Backend: testbackend.New()}
			r := directReconciler(k8sClient, l, backend)
			tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
			b := aShortTask(ns, tmpl).Timeout(time.Hour)
			backend.Set(b.Name(), testbackend.Script{})
			backend.setStage(stage, &obs)
			task := b.Create()
			Eventually(func(g Gomega) {
				_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)})
				g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
			}).WithTimeout(10 * time.Second).Should(Succeed())
			done := finished(ns, task.Name)
			Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
			Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
			Expect(done.Status.Error.Code).To(Equal(string(stage) + "_failed"))
		},
		Entry("analyze outputs that store over etcd's limit", videogenv1alpha1.StageAnalyze,
			generation.Observation{State: generation.Succeeded, Outputs: map[string]string{"face_track": strings.Repeat("<", 300_000)}}),
		Entry("a javascript: result URL", videogenv1alpha1.StageRender,
			generation.Observation{State: generation.Succeeded, Result: &videogenv1alpha1.TaskResult{URL: "javascript:alert(document.cookie)"}}),
		Entry("a file: result URL", videogenv1alpha1.StageRender,
			generation.Observation{State: generation.Succeeded, Result: &videogenv1alpha1.TaskResult{URL: "file:///etc/passwd"}}),
	)
})

// answerBackend is the test backend, except that Observe answers what the test set, if anything.
type answerBackend struct {
	*testbackend.Backend
	mu      sync.Mutex
	obs     *generation.Observation
	results map[string]*videogenv1alpha1.TaskResult // by task, for a succeeded render
	stages  map[videogenv1alpha1.StageName]*generation.Observation
}

func (b *answerBackend) setStage(stage videogenv1alpha1.StageName, obs *generation.Observation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stages == nil {
		b.stages = map[videogenv1alpha1.StageName]*generation.Observation{}
	}
	b.stages[stage] = obs
}

func (b *answerBackend) result(task string, r *videogenv1alpha1.TaskResult) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.results == nil {
		b.results = map[string]*videogenv1alpha1.TaskResult{}
	}
	b.results[task] = r
}

func (b *answerBackend) set(obs *generation.Observation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.obs = obs
}

func (b *answerBackend) Observe(ctx context.Context, w generation.Work, handle string) (generation.Observation, error) {
	b.mu.Lock()
	obs, result := b.obs, b.results[w.Task]
	if o := b.stages[w.Stage]; o != nil {
		obs = o
	}
	b.mu.Unlock()
	if obs != nil {
		return *obs, nil
	}
	o, err := b.Backend.Observe(ctx, w, handle)
	if err == nil && o.Result != nil && result != nil {
		o.Result = result.DeepCopy()
	}
	return o, err
}

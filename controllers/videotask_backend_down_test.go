package controllers_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/httpbackend"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// The QA reports of a worker stopped mid-render (kill -STOP) or restarted: the task must still
// end on time, its running stage marked Canceled and cancelled at the backend, best effort.
var _ = Describe("A task whose backend is unreachable", func() {
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

	// runningTask creates a task of timeout whose analyze stage runs at backend, and reconciles
	// it with r until it runs.
	runningTask := func(r *controllers.VideoTaskReconciler, timeout time.Duration) *videogenv1alpha1.VideoTask {
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		b := aShortTask(ns, tmpl).Timeout(timeout)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))
		}).Should(Succeed())
		return task
	}

	// endedWithStageCanceled checks a task that ended while its analyze stage ran.
	endedWithStageCanceled := func(task *videogenv1alpha1.VideoTask, code string) {
		done := taskOf(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		Expect(done.Status.Error.Code).To(Equal(code))
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
		Expect(done.Finalizers).To(BeEmpty())
		for _, st := range done.Status.Stages {
			Expect(st.State).NotTo(Equal(videogenv1alpha1.StageRunning), "stage %s of an ended task", st.Name)
		}
		Expect(done.Status.Stages).To(ContainElement(SatisfyAll(
			HaveField("Name", videogenv1alpha1.StageAnalyze), HaveField("State", videogenv1alpha1.StageCanceled))))
		Expect(backend.cancelAsked(generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageAnalyze))).
			To(BeTrue(), "the backend was asked to stop the stage")
	}

	DescribeTable("marks its running stage Canceled and asks the backend to cancel it, without waiting for the backend",
		func(end func(*controllers.VideoTaskReconciler, *clocktesting.FakePassiveClock, *videogenv1alpha1.VideoTask), code string) {
			r := directReconciler(k8sClient, l, backend)
			fake := clocktesting.NewFakePassiveClock(timeNow())
			r.Clock = fake
			r.Config.CancelTimeout = 300 * time.Millisecond
			task := runningTask(r, time.Minute)

			// The worker is stopped: every call fails, and a cancel hangs until it is given up.
			backend.observe = func(context.Context) error { return errors.New("connection refused") }
			backend.cancel = hangUntilDone
			end(r, fake, task)
			Eventually(func(g Gomega) {
				started := time.Now()
				reconcileOnce(g, r, task)
				g.Expect(time.Since(started)).To(BeNumerically("<", 3*time.Second), "a reconcile held by the backend")
				g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
			}).Should(Succeed())
			endedWithStageCanceled(task, code)
		},
		Entry("when it is cancelled", func(_ *controllers.VideoTaskReconciler, _ *clocktesting.FakePassiveClock, task *videogenv1alpha1.VideoTask) {
			requestCancel(task)
		}, "canceled"),
		Entry("when it times out", func(_ *controllers.VideoTaskReconciler, fake *clocktesting.FakePassiveClock, _ *videogenv1alpha1.VideoTask) {
			fake.SetTime(fake.Now().Add(2 * time.Minute))
		}, "timed_out"),
	)

	It("tells on-call once per outage, with a Warning event and a metric", func() {
		r := directReconciler(k8sClient, l, backend)
		recorder := events.NewFakeRecorder(100)
		r.Recorder = recorder
		task := runningTask(r, time.Minute)
		labels := map[string]string{"backend": "test-backend", "stage": "analyze"}
		errorsBefore := metricValue("videogen_backend_errors_total", labels)
		warnings := func() int {
			n := 0
			for {
				select {
				case e := <-recorder.Events:
					// Not "did not answer": the outage may be answers (a 401 of a wrong token, a
					// 503 busy, 500s), and the error in parentheses then says "backend answered".
					if strings.HasPrefix(e, "Warning BackendUnavailable Backend test-backend is unavailable for the analyze stage; retrying") {
						n++
					}
				default:
					return n
				}
			}
		}
		warnings() // the events of the task's start

		// The manager's log, at its default verbosity: the outage once, not each retry.
		var logged atomic.Int32
		logger := funcr.New(func(_, args string) {
			if strings.Contains(args, "backend unavailable, will retry") && strings.Contains(args, `"backend"="test-backend"`) {
				logged.Add(1)
			}
		}, funcr.Options{})
		backend.setDown(func(context.Context) error { return errors.New("connection refused") }, nil)
		for range 3 {
			_, err := r.Reconcile(logf.IntoContext(ctx, logger), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)})
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(warnings()).To(Equal(1), "one Warning for the outage, not one per retry")
		Expect(logged.Load()).To(BeNumerically("==", 1), "one log line for the outage, not one per retry")
		Expect(metricValue("videogen_backend_errors_total", labels) - errorsBefore).To(BeNumerically("==", 3))

		// It answers again, then stops again: a second outage is told too.
		backend.setDown(nil, nil)
		reconcileOnce(Default, r, task)
		Expect(meta.IsStatusConditionTrue(taskOf(ns, task.Name).Status.Conditions, videogenv1alpha1.ConditionDispatched)).To(BeTrue())
		backend.setDown(func(context.Context) error { return errors.New("connection refused") }, nil)
		reconcileOnce(Default, r, task)
		Expect(warnings()).To(Equal(1), "the second outage")
	})

	// The worker stopped mid-task: each look takes the HTTP client's full retries (about 61 s),
	// which here pass on the fake clock during the failing call.
	It("times out on the first failed look that ended past its deadline", func() {
		r := directReconciler(k8sClient, l, backend)
		fake := clocktesting.NewFakePassiveClock(timeNow())
		r.Clock = fake
		task := runningTask(r, 30*time.Second)

		var failures atomic.Int32
		backend.observe = func(context.Context) error {
			fake.SetTime(fake.Now().Add(61 * time.Second))
			failures.Add(1)
			return errors.New("backend GET /v1/stages/stg_1: context deadline exceeded")
		}
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(failures.Load()).To(BeNumerically(">=", 1))
		}).Should(Succeed())
		Expect(failures.Load()).To(Equal(int32(1)))
		endedWithStageCanceled(task, "timed_out")
	})

	It("never lets a backend call run past the task's deadline", func() {
		r := directReconciler(k8sClient, l, backend)
		r.Clock = clock.RealClock{}
		r.Config.CancelTimeout = 300 * time.Millisecond
		task := runningTask(r, 5*time.Second)

		backend.observe, backend.cancel = hangUntilDone, hangUntilDone
		deadline := task.CreationTimestamp.Add(5 * time.Second)
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(time.Until(deadline) + 5*time.Second).Should(Succeed())
		Expect(time.Now()).To(BeTemporally("<", deadline.Add(3*time.Second)), "ended soon after its deadline")
		endedWithStageCanceled(task, "timed_out")
	})

	// kill -STOP on the worker: each call would wait for the HTTP client's retries (about 61 s),
	// holding a task worker, and a new task would show nothing until then.
	It("shows a hung backend as unavailable after one bounded call, not after the client's retries", func() {
		r := directReconciler(k8sClient, l, backend)
		r.Clock = clock.RealClock{}
		r.Config.BackendCallTimeout = 500 * time.Millisecond
		task := runningTask(r, time.Minute)

		backend.setDown(hangUntilDone, nil)
		started := time.Now()
		reconcileOnce(Default, r, task)
		Expect(time.Since(started)).To(BeNumerically("<", 3*time.Second), "a reconcile held by the hung backend")
		got := taskOf(ns, task.Name)
		Expect(got.Status.Phase).To(Equal(videogenv1alpha1.TaskRunning), "the task waits for its backend until its timeout")
		Expect(meta.FindStatusCondition(got.Status.Conditions, videogenv1alpha1.ConditionDispatched)).To(SatisfyAll(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", videogenv1alpha1.ReasonBackendUnavailable)))
	})

	// kill -STOP on the worker, then POST /v1/tasks/{id}/cancel: the poll under way would wait
	// for the HTTP client's retries (about 61 s) before the cancel request is even seen.
	It("stops waiting for a hung backend when the task is cancelled", func() {
		stopLedger() // the manager runs its own
		opts := testOptions(backend)
		opts.Task.CancelTimeout = 300 * time.Millisecond
		startManager(opts)
		ns = suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		b := aShortTask(ns, tmpl)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()
		Eventually(func() videogenv1alpha1.TaskPhase { return taskOf(ns, task.Name).Status.Phase }).Should(Equal(videogenv1alpha1.TaskRunning))

		var hung atomic.Int32
		backend.onlyIn(ns) // the look that hangs is this task's
		backend.setDown(func(ctx context.Context) error { hung.Add(1); return hangUntilDone(ctx) }, hangUntilDone)
		Eventually(hung.Load).Should(BeNumerically(">=", 1), "a look at the stage hangs")
		requestCancel(task)
		Eventually(func() bool { return taskOf(ns, task.Name).Status.Phase.Terminal() }).WithTimeout(5 * time.Second).Should(BeTrue())
		endedWithStageCanceled(task, "canceled")
	})

	// A worker that forgets every stage it takes: observing one answers 404 each time. The
	// stage is submitted again twice (a restart loses a stage once), then the task fails.
	It("says in the caller's terms that the backend lost a stage it keeps forgetting", func() {
		var (
			lost    atomic.Bool
			submits atomic.Int32
		)
		worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch {
			case req.Method == http.MethodPost && req.URL.Path == "/v1/stages":
				submits.Add(1)
				_, _ = w.Write([]byte(`{"id":"stg_68b5","state":"running","progress":10}`))
			case req.Method == http.MethodGet && req.URL.Path == "/v1/stages/stg_68b5" && !lost.Load():
				_, _ = w.Write([]byte(`{"id":"stg_68b5","state":"running","progress":50}`))
			default:
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no stage stg_68b5 (unknown, or forgotten after its result TTL)"}}`))
			}
		}))
		DeferCleanup(worker.Close)
		client, err := httpbackend.New(httpbackend.Config{BaseURL: worker.URL})
		Expect(err).NotTo(HaveOccurred())
		r := directReconciler(k8sClient, l, client)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))
		}).Should(Succeed())

		lost.Store(true) // the worker restarted
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Error.Code).To(Equal("analyze_failed"))
		Expect(done.Status.Error.Message).To(Equal("the backend lost the analyze stage 3 times (it may have restarted)"))
		Expect(meta.FindStatusCondition(done.Status.Conditions, videogenv1alpha1.ConditionFailed).Message).To(Equal(done.Status.Error.Message))
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
		// Operators still find the backend's answer on the stage.
		Expect(done.Status.Stages).To(ContainElement(SatisfyAll(
			HaveField("Name", videogenv1alpha1.StageAnalyze),
			HaveField("State", videogenv1alpha1.StageFailed),
			HaveField("Resubmissions", int32(2)),
			HaveField("Message", ContainSubstring("GET /v1/stages/stg_68b5 with 404")))))
		Expect(submits.Load()).To(Equal(int32(3)), "the first submission and two more, no more")
	})
})

// reconcileOnce runs one reconcile of task with r.
func reconcileOnce(g Gomega, r *controllers.VideoTaskReconciler, task *videogenv1alpha1.VideoTask) {
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)})
	g.Expect(err).NotTo(HaveOccurred())
}

// requestCancel asks for task's cancellation, as POST /v1/tasks/{id}/cancel does.
func requestCancel(task *videogenv1alpha1.VideoTask) {
	GinkgoHelper()
	t := taskOf(task.Namespace, task.Name)
	patch := client.MergeFrom(t.DeepCopy())
	t.Annotations = map[string]string{videogenv1alpha1.AnnotationCancelRequested: "true"}
	Expect(k8sClient.Patch(ctx, t, patch)).To(Succeed())
}

// hangUntilDone is a call to a stopped worker: no answer until the caller gives up (or, so that
// a test without bounds fails instead of hanging, for a long while).
func hangUntilDone(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return errors.New("test backend: no answer")
	}
}

// downBackend is a testbackend whose Submit, Observe and Cancel, once set, fail (or hang) as an
// unreachable worker's do. It records every Cancel asked, failed or not.
type downBackend struct {
	*testbackend.Backend
	// submit, if set, is called first by each Submit: an error is Submit's answer, nil lets the
	// test backend take the stage.
	submit          func(context.Context) error
	observe, cancel func(context.Context) error

	mu    sync.Mutex
	asked map[string]bool
	// only, if set, limits the hooks to work of that namespace: other specs' open tasks are
	// routed to this backend too, and must neither trip a hook nor be counted by it.
	only string
}

// onlyIn limits the hooks to the work of namespace ns.
func (b *downBackend) onlyIn(ns string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.only = ns
}

// hooked reports whether the hooks apply to w. Call it with b.mu held.
func (b *downBackend) hooked(w generation.Work) bool {
	return b.only == "" || b.only == w.Namespace
}

// setDown makes Observe and Cancel call observe and cancel, while a manager may be calling them.
func (b *downBackend) setDown(observe, cancel func(context.Context) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.observe, b.cancel = observe, cancel
}

// setSubmit makes each Submit call submit first, while a manager may be calling it.
func (b *downBackend) setSubmit(submit func(context.Context) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.submit = submit
}

func (b *downBackend) Submit(ctx context.Context, w generation.Work) (string, error) {
	b.mu.Lock()
	submit := b.submit
	hooked := b.hooked(w)
	b.mu.Unlock()
	if submit != nil && hooked {
		if err := submit(ctx); err != nil {
			return "", err
		}
	}
	return b.Backend.Submit(ctx, w)
}

func (b *downBackend) Observe(ctx context.Context, w generation.Work, handle string) (generation.Observation, error) {
	b.mu.Lock()
	observe := b.observe
	hooked := b.hooked(w)
	b.mu.Unlock()
	if observe != nil && hooked {
		return generation.Observation{}, observe(ctx)
	}
	return b.Backend.Observe(ctx, w, handle)
}

func (b *downBackend) Cancel(ctx context.Context, w generation.Work, handle string) error {
	b.mu.Lock()
	if b.asked == nil {
		b.asked = map[string]bool{}
	}
	b.asked[w.Key] = true
	cancel := b.cancel
	hooked := b.hooked(w)
	b.mu.Unlock()
	if cancel != nil && hooked {
		return cancel(ctx)
	}
	return b.Backend.Cancel(ctx, w, handle)
}

func (b *downBackend) cancelAsked(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.asked[key]
}

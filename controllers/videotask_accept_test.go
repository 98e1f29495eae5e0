package controllers_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// A task's acceptance (phase Queued, Accepted, its points frozen) is written with its first
// stage's dispatch: one status write for a task whose backend answers at once. A backend that
// does not answer must not keep the new task without a phase, nor tell its acceptance twice.
var _ = Describe("A new task whose backend is slow to take its first stage", func() {
	var backend *downBackend
	BeforeEach(func() {
		backend = &downBackend{Backend: testbackend.New()}
	})

	// blockSubmit makes each Submit wait until release is closed (then the backend takes the
	// stage) or its caller gives up; it returns how many Submits were made.
	blockSubmit := func(release <-chan struct{}) *atomic.Int32 {
		var calls atomic.Int32
		backend.setSubmit(func(ctx context.Context) error {
			calls.Add(1)
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		return &calls
	}

	// kill -STOP on the worker before a task comes: each Submit waits for BackendCallTimeout
	// (20 s), and kubectl get videotask showed the task without a phase all that time.
	It("shows its acceptance within a few seconds while Submit has not answered, and runs once it does", func() {
		startManager(testOptions(backend))
		ns := suite.NewAccount(100)
		backend.onlyIn(ns) // the Submits counted are this task's
		release := make(chan struct{})
		submits := blockSubmit(release)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Create()

		Eventually(func(g Gomega) {
			t := taskOf(ns, task.Name)
			g.Expect(t.Status.Phase).To(Equal(videogenv1alpha1.TaskQueued))
			g.Expect(meta.FindStatusCondition(t.Status.Conditions, videogenv1alpha1.ConditionAccepted)).To(SatisfyAll(
				Not(BeNil()), HaveField("Status", metav1.ConditionTrue), HaveField("Reason", videogenv1alpha1.ReasonFrozen)))
		}).WithTimeout(5*time.Second).Should(Succeed(), "accepted while the backend has not answered")
		got := taskOf(ns, task.Name)
		Expect(submits.Load()).To(BeNumerically(">=", 1))
		Expect(got.Status.Charge).To(Equal(videogenv1alpha1.ChargeFrozen))
		Expect(got.Status.Cost).To(HaveValue(Equal(int64(20))))
		Expect(got.Status.TemplateMediaURL).To(Equal("https://media.example/template.mp4"))
		Expect(got.Status.Stages).To(ContainElement(SatisfyAll(
			HaveField("Name", videogenv1alpha1.StageAnalyze), HaveField("State", videogenv1alpha1.StagePending),
			HaveField("Handle", ""), HaveField("Message", "waiting for test-backend to take the stage"))))
		Eventually(func() []string { return eventReasons(ns, task.Name) }).Should(ContainElement(videogenv1alpha1.ReasonFrozen))

		// The worker answers again: the next Submit (the same key) starts the stage.
		close(release)
		Expect(finished(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded))
		Expect(backend.Submits(generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageAnalyze))).To(Equal(1))
		suite.ExpectBalanced(ns, 80, 0, 20)
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
		Expect(cutShort).To(MatchError(context.Canceled), "the cancel request, not acceptWait, cut the Submit short")
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

	DescribeTable("accepts and dispatches a task whose backend answers within acceptWait in one status write",
		func(latency time.Duration) {
			ns := accountWithoutController(100)
			l, stopLedger := startLedger()
			DeferCleanup(stopLedger)
			if latency > 0 {
				backend.setSubmit(func(ctx context.Context) error {
					select {
					case <-time.After(latency):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				})
			}
			direct, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
			Expect(err).NotTo(HaveOccurred())
			var writes atomic.Int32
			counting := interceptor.NewClient(direct, interceptor.Funcs{
				SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					if _, ok := obj.(*videogenv1alpha1.VideoTask); ok && sub == "status" {
						writes.Add(1)
					}
					return c.SubResource(sub).Update(ctx, obj, opts...)
				},
			})
			r := directReconciler(counting, l, backend)
			tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
			b := aShortTask(ns, tmpl)
			backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
			task := b.Create()

			Eventually(func(g Gomega) {
				reconcileOnce(g, r, task)
				g.Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))
			}).Should(Succeed())
			got := taskOf(ns, task.Name)
			Expect(meta.IsStatusConditionTrue(got.Status.Conditions, videogenv1alpha1.ConditionAccepted)).To(BeTrue())
			Expect(meta.IsStatusConditionTrue(got.Status.Conditions, videogenv1alpha1.ConditionDispatched)).To(BeTrue())
			Expect(writes.Load()).To(Equal(int32(1)), "acceptance and dispatch in one status write")
		},
		Entry("at once", time.Duration(0)),
		Entry("in 500 ms", 500*time.Millisecond),
	)
})

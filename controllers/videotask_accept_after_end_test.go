package controllers_test

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/watchlag"
)

// A task's acceptance from a copy older than the task's end.
var _ = Describe("Accepting a task that has already ended", func() {
	// What breaks: accept submits a task's first stage before the status write that records
	// its acceptance (advance: Submit, then the write). A reconcile made from a cache copy older
	// than the task's end (the write that ended it landed, but its answer was an error: the
	// connection cut, a timeout) sees a task that has not started: the ledger's books have not
	// seen the end either (the same informer brings it to both), so View answers Unadmitted from
	// the entry of that very copy. If the reason for the refusal went away meanwhile (another
	// task's hold ended), Admit takes the task, its analyze stage is submitted, and the
	// acceptance write conflicts with the stored end: the hold is taken back (Unadmit), the
	// status never shows the stage, and the task stays Failed; reconcileFinished stops nothing.
	// The work runs at the backend for a task that ended, paid by nobody, to its own deadline.
	// (videotask_accept_lost_write_test.go covers the order the other way round: the stage submitted first, the task
	// refused after.)
	//
	// Steps, each a real reconcile against envtest (the ledger's informer lags 3 s, as a slow
	// watch does; every step of the window below takes milliseconds):
	//  1. Kubectl tasks a and b on a template of price 60; the account has 100. a is accepted
	//     (60 frozen; its analyze hangs at the backend).
	//  2. b's reconcile: Admit(b, 60): 40 available, refused; reject writes Failed
	//     (insufficient_balance): the write lands, its answer is an error.
	//  3. The tenant cancels a: it ends Cancelled, Refunded (100 available again).
	//  4. b's retry reads the copy from before its end (the cache has not brought the end):
	//     View Unadmitted, Admit(b, 60) holds, Submit(b's analyze), the acceptance write
	//     conflicts, Unadmit.
	//  5. The end reaches the cache and the ledger: b's reconciles find it finished.
	//
	// Reachable: a write that lands and answers an error is among the faults the ledger is built
	// for (docs/ledger.md); the controller retries at once (5 ms backoff) while the watch of the
	// end is still on its way; a hold ending between is any other task of the account finishing.
	// What a user sees: nothing (b is Failed, not charged); the operator pays for b's stage.
	It("stops the stage a stale copy's acceptance submitted for a task whose end had landed", func() {
		ns := accountWithoutController(100)
		lagOpts := cache.Options{ByObject: controllers.CacheByObject(), NewInformer: watchlag.NewInformer(3 * time.Second)}
		l, stopLedger := startLedgerWithCache(lagOpts)
		defer stopLedger()
		backend := &downBackend{Backend: testbackend.New()}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(60).Create()
		ba, bb := aShortTask(ns, tmpl), aShortTask(ns, tmpl)
		backend.Set(ba.Name(), testbackend.Script{Analyze: testbackend.Hang})
		backend.Set(bb.Name(), testbackend.Script{Analyze: testbackend.Hang})
		a, b := ba.Create(), bb.Create()
		keyB := generation.WorkKey(ns, b.Name, string(b.UID), videogenv1alpha1.StageAnalyze)

		var (
			mu        sync.Mutex
			lastRead  *videogenv1alpha1.VideoTask // b as the reconcile last read it
			endLanded bool                        // step 2 happened
			stale     *videogenv1alpha1.VideoTask // served for b instead of the stored copy
		)
		direct, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		c := interceptor.NewClient(direct, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				t, ok := obj.(*videogenv1alpha1.VideoTask)
				if !ok || key.Name != b.Name {
					return c.Get(ctx, key, obj, opts...)
				}
				mu.Lock()
				defer mu.Unlock()
				if stale != nil {
					stale.DeepCopyInto(t)
					return nil
				}
				if err := c.Get(ctx, key, obj, opts...); err != nil {
					return err
				}
				lastRead = t.DeepCopy()
				return nil
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				t, ok := obj.(*videogenv1alpha1.VideoTask)
				if !ok || t.Name != b.Name || t.Status.Phase != videogenv1alpha1.TaskFailed {
					return c.SubResource(sub).Update(ctx, obj, opts...)
				}
				mu.Lock()
				defer mu.Unlock()
				if endLanded {
					return c.SubResource(sub).Update(ctx, obj, opts...)
				}
				if err := c.SubResource(sub).Update(ctx, obj, opts...); err != nil {
					return err
				}
				endLanded = true
				return apierrors.NewTimeoutError("the answer was lost", 1) // it landed all the same
			},
		})
		r := directReconciler(c, l, backend)
		reconcile := func(t *videogenv1alpha1.VideoTask) error {
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(t)})
			return err
		}

		// 1. a is accepted (once the ledger's lagging event brings it).
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, a)
			g.Expect(taskOf(ns, a.Name).Status.Charge).To(Equal(videogenv1alpha1.ChargeFrozen))
		}).WithTimeout(15 * time.Second).Should(Succeed())

		// 2. b is refused; the write that ends it lands and answers an error.
		Eventually(func() bool {
			_ = reconcile(b)
			mu.Lock()
			defer mu.Unlock()
			return endLanded
		}).WithTimeout(15 * time.Second).Should(BeTrue())
		window := time.Now()
		Expect(taskOf(ns, b.Name).Status.Error.Code).To(Equal("insufficient_balance"))
		mu.Lock()
		Expect(lastRead.Status.Phase).NotTo(Equal(videogenv1alpha1.TaskFailed))
		stale = lastRead.DeepCopy()
		mu.Unlock()
		backend.forgetCancels(keyB) // reject asked to stop b's stages before any was submitted

		// 3. a is cancelled: its points come back.
		requestCancel(a)
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, a)
			g.Expect(taskOf(ns, a.Name).Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
		}).WithTimeout(2 * time.Second).Should(Succeed())

		// 4. b's retry from the copy before its end.
		Expect(reconcile(b)).To(Succeed())
		Expect(time.Since(window)).To(BeNumerically("<", 3*time.Second), "the ledger's event of b's end was still on its way")
		Expect(taskOf(ns, b.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskFailed), "b's end stays")
		submitted := backend.Submits(keyB)
		mu.Lock()
		stale = nil
		mu.Unlock()

		// 5. The end reaches the ledger; b's reconciles find it finished.
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, b)
			g.Expect(taskOf(ns, b.Name).Status.Closed).To(BeTrue())
		}).WithTimeout(15 * time.Second).Should(Succeed())
		Expect(taskOf(ns, b.Name).Status.Charge).To(BeEmpty(), "nothing charged")
		Expect(submitted).To(Equal(1), "step 4 submitted b's analyze stage (the interleaving happened)")
		Expect(backend.cancelAsked(keyB)).To(BeTrue(),
			"a stage submitted for a task whose end had landed was left running at the backend, unpaid")
	})
})

// forgetCancels forgets the cancels asked for key so far.
func (b *downBackend) forgetCancels(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.asked, key)
}

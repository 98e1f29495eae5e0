package controllers_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/watchlag"
)

var _ = Describe("A task deleted before its cancel-work finalizer", func() {
	// letGo takes every finalizer off a task left Terminating (envtest runs no garbage
	// collector, which would take foregroundDeletion and orphan off in a real cluster).
	letGo := func(key client.ObjectKey) {
		t := &videogenv1alpha1.VideoTask{}
		if err := k8sClient.Get(ctx, key, t); err == nil && len(t.Finalizers) > 0 {
			t.Finalizers = nil
			Expect(client.IgnoreNotFound(k8sClient.Update(ctx, t))).To(Succeed())
		}
	}

	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan} {
		It("stops the stage it submitted when the task is deleted with propagation "+string(policy)+" before the finalizer is on", func() {
			// Interleaving, each step a real call against envtest, forced by an interceptor:
			//  1. A reconcile accepts the kubectl task, submits its analyze stage (it runs at
			//     the backend) and writes the status that records it (stage Running, handle).
			//  2. Before its next call, the patch that puts FinalizerCancelWork on, the tenant
			//     deletes the task with `kubectl delete --cascade=foreground` (or orphan).
			//     Reachable: any client picks the propagation policy of its delete, and the
			//     status write and the finalizer patch are two calls. The kube-apiserver then
			//     keeps the task (deletionTimestamp set, finalizer foregroundDeletion/orphan)
			//     until the garbage collector lets it go, a moment later.
			//  3. The finalizer patch, made with the optimistic lock from the copy before the
			//     deletion, conflicts (not NotFound, not Invalid: guardWork's cancel does not
			//     run); the reconcile is retried.
			//  4. The retry reads the task with its deletionTimestamp: finalize. Before the fix
			//     it saw no FinalizerCancelWork and returned without cancelling anything.
			// What a user would see: the task is gone and its hold ended (the ledger drops it),
			// while its stage runs on at the backend, unpaid, until its deadline (the task's
			// timeout plus a minute): exactly what the finalizer and its admission policy are
			// there to prevent (docs/ledger.md, "Deleting things").
			ns := accountWithoutController(100)
			tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
			b := aShortTask(ns, tmpl)
			backend := testbackend.New()
			backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
			task := b.Create()
			key := client.ObjectKeyFromObject(task)
			DeferCleanup(letGo, key)

			l, stopLedger := startLedger()
			defer stopLedger()

			direct, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
			Expect(err).NotTo(HaveOccurred())
			deleted := false
			var patchErr error
			reconciler := interceptor.NewClient(direct, interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if t, ok := obj.(*videogenv1alpha1.VideoTask); ok && t.Name == key.Name && !deleted {
						deleted = true
						Expect(k8sClient.Delete(ctx, task.DeepCopy(), client.PropagationPolicy(policy))).To(Succeed())
						patchErr = c.Patch(ctx, obj, patch, opts...)
						return patchErr
					}
					return c.Patch(ctx, obj, patch, opts...)
				},
			})
			r := directReconciler(reconciler, l, backend)
			// Until the ledger's event brings the task, the reconcile asks again shortly.
			Eventually(func(g Gomega) {
				_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
				g.Expect(deleted).To(BeTrue())
			}).Should(Succeed())
			Expect(apierrors.IsConflict(patchErr)).To(BeTrue(), "the finalizer patch meets the deletion: %v", patchErr)

			stored := taskOf(ns, task.Name)
			Expect(stored.DeletionTimestamp).NotTo(BeNil(), "kept by the garbage collector's finalizer")
			Expect(stored.Finalizers).NotTo(ContainElement(videogenv1alpha1.FinalizerCancelWork))
			analyze := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageAnalyze)
			Expect(backend.Submits(analyze)).To(Equal(1), "the analyze stage runs at the backend")

			_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
			Expect(err).NotTo(HaveOccurred())
			Expect(backend.WasCanceled(analyze)).To(BeTrue(), "the deleted task's running stage is stopped")
		})
	}

	It("stops the stage it submitted when the status write recording it meets a foreground deletion", func() {
		// Interleaving, forced by an interceptor: a reconcile accepts the kubectl task and
		// submits its analyze stage (it runs at the backend); before the status write that
		// records the stage and its handle, the tenant deletes the task with
		// --cascade=foreground. The status write, from the copy before the deletion,
		// conflicts: no status shows the stage, and no finalizer is on. The retry reads the
		// deleted task: finalize. Before the fix it returned at once (no FinalizerCancelWork);
		// the stage, known to nobody but the backend (by its key), ran on unpaid.
		ns := accountWithoutController(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		b := aShortTask(ns, tmpl)
		backend := testbackend.New()
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()
		key := client.ObjectKeyFromObject(task)
		DeferCleanup(letGo, key)

		l, stopLedger := startLedger()
		defer stopLedger()

		direct, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		deleted := false
		var writeErr error
		reconciler := interceptor.NewClient(direct, interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if t, ok := obj.(*videogenv1alpha1.VideoTask); ok && t.Name == key.Name && !deleted {
					deleted = true
					Expect(k8sClient.Delete(ctx, task.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
					writeErr = c.SubResource(sub).Update(ctx, obj, opts...)
					return writeErr
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		})
		r := directReconciler(reconciler, l, backend)
		Eventually(func(g Gomega) {
			_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
			g.Expect(deleted).To(BeTrue())
		}).Should(Succeed())
		Expect(apierrors.IsConflict(writeErr)).To(BeTrue(), "the status write meets the deletion: %v", writeErr)
		stored := taskOf(ns, task.Name)
		Expect(stored.DeletionTimestamp).NotTo(BeNil())
		Expect(stored.Status.Stages).To(BeEmpty(), "no status shows the stage")
		analyze := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageAnalyze)
		Expect(backend.Submits(analyze)).To(Equal(1), "the analyze stage runs at the backend")

		_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		Expect(err).NotTo(HaveOccurred())
		Expect(backend.WasCanceled(analyze)).To(BeTrue(), "the deleted task's running stage is stopped, by its key")
	})
})

var _ = Describe("A render that finishes after its task timed out", func() {
	It("Checked, holds: a late success seen from a lagging cache after a refund that landed and erred is never charged", func() {
		// Interleaving, forced step by step against envtest:
		//  1. The task runs its render (FinalizerCancelWork on). Its deadline passes; the
		//     reconcile takes its last look (still running), cancels it, and ends the task
		//     Failed/Refunded: the finalizer patch lands (the ledger observes that copy), then
		//     the terminal status write lands but its answer is lost (a 500 after the write, a
		//     timeout): the ledger is not told, and the reconcile is retried.
		//  2. The retry reads the cache, which has the finalizer patch but not the refund (a
		//     lagging informer: reachable, writes and watch events are separate streams). The
		//     ledger's own events lag too (3 s), so its books say Held at that copy's
		//     resourceVersion: the view is not stale. The backend now reports the render
		//     Succeeded (the cancel came too late at the backend), so the reconcile charges it:
		//     the charge is queued and lands in the account (spent += 10) long before the
		//     ledger's event of the refund comes.
		//  3. The refund's event comes: the task says Refunded while its charge is in the
		//     journal. What a user must see: the task Failed/Refunded (a Deducted status over
		//     it is refused by the status rules), and the 10 points back, nothing frozen.
		ns := accountWithoutController(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		b := aShortTask(ns, tmpl)
		backend := testbackend.New()
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Succeed, Render: testbackend.Hang})
		task := b.Create()
		key := client.ObjectKeyFromObject(task)

		lagOpts := cache.Options{ByObject: controllers.CacheByObject(), NewInformer: watchlag.NewInformer(3 * time.Second)}
		l, stopLedger := startLedgerWithCache(lagOpts)
		defer stopLedger()

		direct, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		var (
			patched   *videogenv1alpha1.VideoTask // the copy after the last finalizer patch
			stale     *videogenv1alpha1.VideoTask // served by the "cache" when set
			loseReply bool
		)
		reconciler := interceptor.NewClient(direct, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if t, ok := obj.(*videogenv1alpha1.VideoTask); ok && k == key && stale != nil {
					stale.DeepCopyInto(t)
					return nil
				}
				return c.Get(ctx, k, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				err := c.Patch(ctx, obj, patch, opts...)
				if t, ok := obj.(*videogenv1alpha1.VideoTask); ok && err == nil {
					patched = t.DeepCopy()
				}
				return err
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				err := c.SubResource(sub).Update(ctx, obj, opts...)
				if t, ok := obj.(*videogenv1alpha1.VideoTask); ok && err == nil && loseReply && t.Status.Phase.Terminal() {
					loseReply = false
					return apierrors.NewInternalError(context.DeadlineExceeded) // landed, answer lost
				}
				return err
			},
		})
		r := directReconciler(reconciler, l, backend)
		clock := r.Clock.(*clocktesting.FakePassiveClock)
		Eventually(func(g Gomega) {
			_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
			t := taskOf(ns, task.Name)
			g.Expect(t.Finalizers).To(ContainElement(videogenv1alpha1.FinalizerCancelWork))
			g.Expect(t.Status.Stages).To(ContainElement(HaveField("State", videogenv1alpha1.StageRunning)))
			g.Expect(t.Status.Stages).To(ContainElement(And(HaveField("Name", videogenv1alpha1.StageRender), HaveField("State", videogenv1alpha1.StageRunning))))
		}).Should(Succeed())

		// 1. Timed out; the refund lands, its answer is lost.
		clock.SetTime(task.CreationTimestamp.Add(r.Config.DefaultTimeout + time.Second))
		loseReply = true
		_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		Expect(err).To(HaveOccurred())
		refunded := taskOf(ns, task.Name)
		Expect(refunded.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		Expect(refunded.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
		Expect(patched).NotTo(BeNil())
		Expect(patched.Status.Phase).To(Equal(videogenv1alpha1.TaskRunning), "the patch's copy is from before the refund")

		// 2. The lagging cache serves the copy before the refund; the render has finished.
		stale = patched.DeepCopy()
		backend.Set(task.Name, testbackend.Script{Analyze: testbackend.Succeed, Render: testbackend.Succeed})
		_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() int64 { return suite.AccountOf(ns).Status.Spent }).Should(Equal(int64(10)),
			"the late success's charge lands before the ledger hears of the refund")

		// 3. The refund's event comes: the charge is given back.
		Eventually(func(g Gomega) {
			acct := suite.AccountOf(ns)
			g.Expect(acct.Status.Spent).To(BeZero())
			g.Expect(acct.Status.Journal).To(BeEmpty())
			f, err := l.Balance(ctx, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(f).To(Equal(ledger.Figures{Balance: 100, Credited: 100}))
		}, 15*time.Second).Should(Succeed())
		stale = nil
		Eventually(func(g Gomega) {
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
			g.Expect(err).NotTo(HaveOccurred())
		}).Should(Succeed())
		end := taskOf(ns, task.Name)
		Expect(end.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		Expect(end.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
	})
})

var _ = Describe("A success whose terminal write lands and errs, then the task is deleted", func() {
	It("Checked, holds: the charge stays spent and its journal entry goes", func() {
		// Interleaving: the task succeeds, its charge lands in the account (spent += 10,
		// journal entry), and the Succeeded/Deducted (and closed) status write lands but its
		// answer is lost: the ledger is not told, and the closed task leaves the informer's
		// selection (an event the ledger reads as a deletion, carrying the copy before). Then
		// the tenant deletes the task (nothing holds it: no finalizer on a finished task). The
		// books must neither give the points back (the task succeeded) nor keep the entry for
		// good (the account could never close): a read finds the task gone, the entry goes.
		ns := accountWithoutController(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		b := aShortTask(ns, tmpl)
		backend := testbackend.New()
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Succeed, Render: testbackend.Succeed})
		task := b.Create()
		key := client.ObjectKeyFromObject(task)

		l, stopLedger := startLedger()
		defer stopLedger()

		direct, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		lost := false
		reconciler := interceptor.NewClient(direct, interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				err := c.SubResource(sub).Update(ctx, obj, opts...)
				if t, ok := obj.(*videogenv1alpha1.VideoTask); ok && err == nil && !lost && t.Status.Charge == videogenv1alpha1.ChargeDeducted {
					lost = true
					return apierrors.NewInternalError(context.DeadlineExceeded) // landed, answer lost
				}
				return err
			},
		})
		r := directReconciler(reconciler, l, backend)
		Eventually(func(g Gomega) {
			_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
			g.Expect(lost).To(BeTrue())
		}).Should(Succeed())
		Expect(taskOf(ns, task.Name).Status.Charge).To(Equal(videogenv1alpha1.ChargeDeducted))
		Expect(k8sClient.Delete(ctx, task.DeepCopy())).To(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key, &videogenv1alpha1.VideoTask{}))).To(BeTrue())
			l.Tidy(ns) // as the PointAccount controller does while the journal is not empty
			acct := suite.AccountOf(ns)
			g.Expect(acct.Status.Spent).To(Equal(int64(10)))
			g.Expect(acct.Status.Journal).To(BeEmpty())
			f, err := l.Balance(ctx, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(f).To(Equal(ledger.Figures{Balance: 90, Spent: 10, Credited: 100}))
		}, 15*time.Second).Should(Succeed())
	})
})

package controllers_test

import (
	"context"
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
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/watchlag"
)

var _ = Describe("VideoTask finalizer", func() {
	// A reconcile that put the finalizer on (its stage runs at the backend) is followed by one
	// from a cache that has its status write but not the patch: it must wait for the cache, not
	// patch again from the older copy (a conflict, retried with backoff: 0.7 per task in the
	// kubectl-backlog scale run).
	It("waits for a cache that has not seen its finalizer instead of patching again", func() {
		ns := accountWithoutController(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		b := aShortTask(ns, tmpl)
		backend := testbackend.New()
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()
		key := client.ObjectKeyFromObject(task)

		// The ledger's watch events come 3 s late (its initial list too, as a watch stream):
		// both reconciles below run within a few milliseconds of each other, long before the
		// patch's event, so the ledger knows only the copies the reconciler hands it.
		lagOpts := cache.Options{ByObject: controllers.CacheByObject(), NewInformer: watchlag.NewInformer(3 * time.Second)}
		l, stopLedger := startLedgerWithCache(lagOpts)
		defer stopLedger()

		direct, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		var statusWritten *videogenv1alpha1.VideoTask // the copy after the last status write
		patches, conflicts := 0, 0
		cached := func(c client.WithWatch, k client.ObjectKey, obj client.Object) error {
			return c.Get(ctx, k, obj)
		}
		reconciler := interceptor.NewClient(direct, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				return cached(c, k, obj)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				patches++
				err := c.Patch(ctx, obj, patch, opts...)
				if apierrors.IsConflict(err) {
					conflicts++
				}
				return err
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				err := c.SubResource(sub).Update(ctx, obj, opts...)
				if err == nil {
					statusWritten = obj.(*videogenv1alpha1.VideoTask).DeepCopy()
				}
				return err
			},
		})
		r := directReconciler(reconciler, l, backend)
		// Until the ledger's lagging events bring the task, the reconcile asks again shortly.
		Eventually(func(g Gomega) {
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(patches).To(Equal(1))
		}).Should(Succeed())
		Expect(taskOf(ns, task.Name).Finalizers).To(ContainElement(videogenv1alpha1.FinalizerCancelWork), "accepted, dispatched and guarded in one reconcile")
		Expect(statusWritten).NotTo(BeNil())
		Expect(statusWritten.Finalizers).To(BeEmpty())

		// The next reconcile reads the copy of the status write, without the finalizer.
		cached = func(c client.WithWatch, k client.ObjectKey, obj client.Object) error {
			if t, ok := obj.(*videogenv1alpha1.VideoTask); ok && k == key {
				statusWritten.DeepCopyInto(t)
				return nil
			}
			return c.Get(ctx, k, obj)
		}
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		Expect(err).NotTo(HaveOccurred())
		Expect(conflicts).To(BeZero())
		Expect(patches).To(Equal(1), "no second patch from the older copy")
		Expect(res.RequeueAfter).To(BeNumerically(">", 0), "asks again once the cache has caught up")
	})
})

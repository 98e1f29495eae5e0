package controllers_test

import (
	"context"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

// reconcileErrors is controller-runtime's count of reconciles of a controller that returned an
// error (each is logged as "Reconciler error" with a stack trace).
func reconcileErrors(controller string) float64 {
	return metricValue("controller_runtime_reconcile_errors_total", map[string]string{"controller": controller})
}

var _ = Describe("Conflicts of the points controllers", func() {
	It("retries a status write that conflicts, quietly, and credits once", func() {
		var conflicts atomic.Int64
		ns := suite.NewAccount(0)
		stop := startManager(testOptions(testbackend.New()), intercepted(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				// The first status write of this spec's top-up meets a newer copy, as after a
				// lagging cache (other specs' leftovers are written as they come).
				if _, ok := obj.(*videogenv1alpha1.PointTopUp); ok && obj.GetNamespace() == ns && conflicts.CompareAndSwap(0, 1) {
					return apierrors.NewConflict(schema.GroupResource{Group: "videogen.dev", Resource: "pointtopups"},
						obj.GetName(), nil)
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}))
		DeferCleanup(stop)
		before := reconcileErrors("pointtopup")

		t := suite.TopUp(ns, "inv-conflict", 500)
		Eventually(appliedReason(t)).Should(Equal(videogenv1alpha1.ReasonCredited))
		Expect(conflicts.Load()).To(Equal(int64(1)), "the conflict was injected")
		suite.ExpectBalanced(ns, 500, 0, 0)
		Expect(reconcileErrors("pointtopup")-before).To(BeZero(), "a conflict is a retry, not a Reconciler error")
	})

	It("retries a finalizer write on an account the ledger wrote meanwhile, quietly", func() {
		var conflicts atomic.Int64
		ns := envsuite.Unique("acct") // known before the manager starts: its hook conflicts this account's patch only
		stop := startManager(testOptions(testbackend.New()), intercepted(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if _, ok := obj.(*videogenv1alpha1.PointAccount); ok && obj.GetNamespace() == ns && conflicts.CompareAndSwap(0, 1) {
					return apierrors.NewConflict(schema.GroupResource{Group: "videogen.dev", Resource: "pointaccounts"},
						obj.GetName(), nil)
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
		}))
		DeferCleanup(stop)
		before := reconcileErrors("pointaccount")

		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(k8sClient.Create(ctx, &videogenv1alpha1.PointAccount{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: videogenv1alpha1.PointAccountName},
		})).To(Succeed())
		Eventually(func() []string { return suite.AccountOf(ns).Finalizers }).Should(ContainElement(videogenv1alpha1.FinalizerLedger))
		Expect(conflicts.Load()).To(Equal(int64(1)), "the conflict was injected")
		Expect(reconcileErrors("pointaccount")-before).To(BeZero(), "a conflict is a retry, not a Reconciler error")
	})
})

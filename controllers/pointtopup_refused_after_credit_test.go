package controllers_test

import (
	"context"
	"errors"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

var _ = Describe("PointTopUp refused by hand after its credit", func() {
	// A top-up whose credit the ledger wrote to the account, its own status not written yet
	// (here its status writes fail, as while the manager is down or crash-looping), is marked
	// refused by hand (Applied=False/DuplicateReference: the audit policy then lets it be
	// deleted). The books win: the controller writes it applied over the refusal, so its
	// reference stays used (a new manager's books keep it) and it can no longer be deleted.
	It("writes the credit over the hand-written refusal", func() {
		var blocked atomic.Bool
		blocked.Store(true)
		stop := startManager(testOptions(testbackend.New()), intercepted(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if _, ok := obj.(*videogenv1alpha1.PointTopUp); ok && blocked.Load() {
					return errors.New("injected: the top-up's status write does not get through")
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}))
		defer stop()
		ns := suite.NewAccount(0)
		inv := suite.TopUp(ns, "inv", 100)
		Eventually(func() int64 { return suite.AccountOf(ns).Status.Credited }).Should(Equal(int64(100)))

		edited := topUpOf(inv)
		Expect(edited.Status.AppliedAt).To(BeNil())
		meta.SetStatusCondition(&edited.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied,
			Status: metav1.ConditionFalse, Reason: videogenv1alpha1.ReasonDuplicateReference, Message: "cleanup by hand"})
		Expect(k8sClient.Status().Update(ctx, edited)).To(Succeed()) // the kube-apiserver takes it
		blocked.Store(false)

		Eventually(appliedReason(inv)).Should(Equal(videogenv1alpha1.ReasonCredited))
		got := topUpOf(inv)
		Expect(got.Status.AppliedAt).NotTo(BeNil())
		Expect(*got.Status.BalanceAfter).To(Equal(int64(100)))
		Eventually(func() int { return len(suite.AccountOf(ns).Status.Journal) }).Should(BeZero())
		err := k8sClient.Delete(ctx, topUpOf(inv))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("part of the account's audit trail"))

		again := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "again"},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: 100, Reference: inv.Spec.Reference}}
		Expect(k8sClient.Create(ctx, again)).To(Succeed())
		Eventually(appliedReason(again)).Should(Equal(videogenv1alpha1.ReasonDuplicateReference))
		Expect(suite.AccountOf(ns).Status.Credited).To(Equal(int64(100)))
	})
})

package controllers_test

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

var _ = Describe("PointTopUp refused by hand for another reason", func() {
	// Since 7aa2059 the controller asks the ledger about refused top-ups too. A debit the
	// ledger refused (DebitExceedsBalance: its Refusal entry written, the refusal kept in its
	// books) whose own status write did not get through (the manager down, crash-looping, or
	// its writes failing), is marked refused by hand as DuplicateReference (the reason the
	// audit policy's users reach for to be allowed to delete a stuck-looking top-up; the CRD
	// takes it: the old status has no decided condition). The ledger answers DebitExceedsBalance,
	// the controller writes that reason, and the CRD refuses to change a refusal's reason: the
	// write fails Invalid, and the reconcile fails again for good (an error every backoff, for
	// as long as the top-up exists). Before 7aa2059 the controller left a refused top-up alone.
	// Fixed: a status already refused for good is not rewritten to another refusal (both say
	// nothing was moved); the journal's Refusal entry goes all the same. Failed before the fix:
	// 3 Invalid status writes by the time the journal emptied, and more at every backoff.
	It("does not fight a refusal written by hand with another refusal", func() {
		var blocked atomic.Bool
		var invalid atomic.Int32
		blocked.Store(true)
		stop := startManager(testOptions(testbackend.New()), intercepted(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if _, ok := obj.(*videogenv1alpha1.PointTopUp); ok {
					if blocked.Load() {
						return errors.New("injected: the top-up's status write does not get through")
					}
					err := c.SubResource(sub).Update(ctx, obj, opts...)
					if apierrors.IsInvalid(err) {
						invalid.Add(1)
					}
					return err
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}))
		defer stop()
		ns := suite.NewAccount(10)
		tooMuch := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "too-much"},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: -50, Reference: "CLOSE-1", Note: "close-out"}}
		Expect(k8sClient.Create(ctx, tooMuch)).To(Succeed())
		// The ledger refused it: its Refusal entry is in the journal (beside the initial top-up's
		// credit, whose status write is blocked too).
		Eventually(func() []videogenv1alpha1.JournalKind {
			var kinds []videogenv1alpha1.JournalKind
			for _, j := range suite.AccountOf(ns).Status.Journal {
				if j.UID == tooMuch.UID {
					kinds = append(kinds, j.Kind)
				}
			}
			return kinds
		}).Should(ConsistOf(videogenv1alpha1.JournalRefusal))

		edited := topUpOf(tooMuch)
		Expect(meta.FindStatusCondition(edited.Status.Conditions, videogenv1alpha1.ConditionApplied)).To(BeNil())
		meta.SetStatusCondition(&edited.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied,
			Status: metav1.ConditionFalse, Reason: videogenv1alpha1.ReasonDuplicateReference, Message: "cleanup by hand"})
		Expect(k8sClient.Status().Update(ctx, edited)).To(Succeed())
		blocked.Store(false)

		// The refusal's journal entry goes (the status shows a refusal), and nothing is debited.
		Eventually(func() int { return len(suite.AccountOf(ns).Status.Journal) }).Should(BeZero())
		Expect(suite.AccountOf(ns).Status.Balance).To(Equal(int64(10)))
		Expect(appliedReason(tooMuch)()).To(Equal(videogenv1alpha1.ReasonDuplicateReference))
		Consistently(invalid.Load, 2*time.Second).Should(BeZero(),
			"the controller keeps writing another refusal's reason over the one written by hand (refused by the CRD)")
	})
})

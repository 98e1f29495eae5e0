package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

var _ = Describe("PointTopUp audit trail", func() {
	var stop func()
	BeforeEach(func() { stop = startManager(testOptions(testbackend.New())) })
	AfterEach(func() { stop() })

	// Checked, holds (a pin): an applied top-up whose Applied condition is edited to a refusal
	// cannot then be deleted: the audit policy allows a delete only without appliedAt. The
	// kube-apiserver also refuses the edit itself (the CRD keeps an Applied=True
	// condition True, with its reason), so `kubectl get ptu` never shows a credited top-up as
	// refused. The controller, seeing appliedAt, leaves it as it is (no second credit).
	It("keeps an applied top-up whose condition was edited to a refusal", func() {
		ns := suite.NewAccount(0)
		t := suite.TopUp(ns, "kept", 70)
		Eventually(appliedReason(t)).Should(Equal(videogenv1alpha1.ReasonCredited))
		edited := topUpOf(t)
		meta.SetStatusCondition(&edited.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied,
			Status: metav1.ConditionFalse, Reason: videogenv1alpha1.ReasonDuplicateReference, Message: "marked by hand"})
		err := k8sClient.Status().Update(ctx, edited)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("an applied one applied"))
		err = k8sClient.Delete(ctx, topUpOf(t))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("part of the account's audit trail"))
		Expect(appliedReason(t)()).To(Equal(videogenv1alpha1.ReasonCredited))
		Consistently(func() int64 { return suite.AccountOf(ns).Status.Credited }, "1s").Should(Equal(int64(70)))
	})

	// A debit refused as DebitExceedsBalance, its status then edited by whoever may
	// write pointtopups/status (the platform-admin role): its condition removed (an update, or
	// a merge patch of status to null, `kubectl patch --subresource=status`), or its reason or
	// status changed. Before the CRD's rule the kube-apiserver took each edit, and a new
	// manager's books, which learn a refusal whose journal entry is gone only from the status,
	// debited it once the balance covered it (internal/ledger,
	// TestARefusedDebitStaysRefusedWhateverItsStatusIsEditedTo). Now each edit is
	// refused; the message may still change, and the refused top-up may still be deleted.
	It("keeps a refused debit refused whatever its status is edited to", func() {
		ns := suite.NewAccount(10)
		tooMuch := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "too-much"},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: -50, Reference: "CLOSE-1", Note: "close-out"}}
		Expect(k8sClient.Create(ctx, tooMuch)).To(Succeed())
		Eventually(appliedReason(tooMuch)).Should(Equal(videogenv1alpha1.ReasonDebitExceedsBalance))

		expectRefused := func(err error) {
			GinkgoHelper()
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring("a refused top-up stays refused"))
		}
		for _, edit := range []func(*videogenv1alpha1.PointTopUpStatus){
			func(s *videogenv1alpha1.PointTopUpStatus) { s.Conditions = nil },
			func(s *videogenv1alpha1.PointTopUpStatus) {
				s.Conditions[0].Reason = videogenv1alpha1.ReasonAccountNotFound
			},
			func(s *videogenv1alpha1.PointTopUpStatus) { s.Conditions[0].Status = metav1.ConditionUnknown },
			func(s *videogenv1alpha1.PointTopUpStatus) {
				s.Conditions[0].Status, s.Conditions[0].Reason = metav1.ConditionTrue, videogenv1alpha1.ReasonDebited
			},
			func(s *videogenv1alpha1.PointTopUpStatus) { *s = videogenv1alpha1.PointTopUpStatus{} },
		} {
			edited := topUpOf(tooMuch)
			edit(&edited.Status)
			expectRefused(k8sClient.Status().Update(ctx, edited))
		}
		expectRefused(k8sClient.Status().Patch(ctx, topUpOf(tooMuch), client.RawPatch(types.MergePatchType, []byte(`{"status":null}`))))

		edited := topUpOf(tooMuch)
		edited.Status.Conditions[0].Message = "refused: see ticket 42"
		Expect(k8sClient.Status().Update(ctx, edited)).To(Succeed())
		Expect(appliedReason(tooMuch)()).To(Equal(videogenv1alpha1.ReasonDebitExceedsBalance))
		Expect(k8sClient.Delete(ctx, topUpOf(tooMuch))).To(Succeed())
	})
})

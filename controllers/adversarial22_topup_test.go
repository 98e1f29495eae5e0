package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

var _ = Describe("PointTopUp audit trail, round 22", func() {
	var stop func()
	BeforeEach(func() { stop = startManager(testOptions(testbackend.New())) })
	AfterEach(func() { stop() })

	// Checked, holds (a pin): an applied top-up whose Applied condition is edited to a refusal
	// (conditions are not part of the CRD's audit rule, so the kube-apiserver takes the edit)
	// cannot then be deleted: the audit policy allows a delete only without appliedAt. The
	// controller, seeing appliedAt, leaves it as it is (no second credit, no refusal written).
	It("keeps an applied top-up whose condition was edited to a refusal", func() {
		ns := suite.NewAccount(0)
		t := suite.TopUp(ns, "kept", 70)
		Eventually(appliedReason(t)).Should(Equal(videogenv1alpha1.ReasonCredited))
		edited := topUpOf(t)
		meta.SetStatusCondition(&edited.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied,
			Status: metav1.ConditionFalse, Reason: videogenv1alpha1.ReasonDuplicateReference, Message: "marked by hand"})
		Expect(k8sClient.Status().Update(ctx, edited)).To(Succeed())
		err := k8sClient.Delete(ctx, topUpOf(t))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("part of the account's audit trail"))
		Consistently(func() int64 { return suite.AccountOf(ns).Status.Credited }, "1s").Should(Equal(int64(70)))
	})
})

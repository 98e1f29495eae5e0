package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

func topUpOf(t *videogenv1alpha1.PointTopUp) *videogenv1alpha1.PointTopUp {
	got := &videogenv1alpha1.PointTopUp{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(t), got)).To(Succeed())
	return got
}

func appliedReason(t *videogenv1alpha1.PointTopUp) func() string {
	return func() string {
		if c := meta.FindStatusCondition(topUpOf(t).Status.Conditions, videogenv1alpha1.ConditionApplied); c != nil {
			return c.Reason
		}
		return ""
	}
}

var _ = Describe("PointTopUp", func() {
	var stop func()
	BeforeEach(func() { stop = startManager(testOptions(testbackend.New())) })
	AfterEach(func() { stop() })

	It("credits once, records the account and the balance after it, and keeps the journal empty after", func() {
		ns := suite.NewAccount(0)
		t := suite.TopUp(ns, "inv-7", 500)
		Eventually(appliedReason(t)).Should(Equal(videogenv1alpha1.ReasonCredited))
		applied := topUpOf(t)
		Expect(*applied.Status.BalanceAfter).To(Equal(int64(500)))
		Expect(applied.Status.AccountUID).To(Equal(suite.AccountOf(ns).UID))
		suite.ExpectBalanced(ns, 500, 0, 0)
		Eventually(func() int { return len(suite.AccountOf(ns).Status.Journal) }).Should(BeZero())
		Expect(suite.AccountOf(ns).Status.Credited).To(Equal(int64(500)))
	})

	It("refuses a second top-up with a reference already applied in the account", func() {
		ns := suite.NewAccount(0)
		first := suite.TopUp(ns, "first", 100)
		Eventually(appliedReason(first)).Should(Equal(videogenv1alpha1.ReasonCredited))
		dup := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dup"},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: 100, Reference: first.Spec.Reference}}
		Expect(k8sClient.Create(ctx, dup)).To(Succeed())
		Eventually(appliedReason(dup)).Should(Equal(videogenv1alpha1.ReasonDuplicateReference))
		Expect(topUpOf(dup).Status.AppliedAt).To(BeNil())
		// The account that refused it: one created again later does not show it as its own.
		Expect(topUpOf(dup).Status.AccountUID).To(Equal(suite.AccountOf(ns).UID))
		Consistently(func() int64 { return suite.AccountOf(ns).Status.Credited }, "500ms").Should(Equal(int64(100)))
		// Refused for good, it credited nothing: it may go.
		Expect(k8sClient.Delete(ctx, topUpOf(dup))).To(Succeed())
	})

	It("debits with a note, and refuses a debit beyond the balance or without a note", func() {
		ns := suite.NewAccount(100)
		noNote := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-note"},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: -10, Reference: "CORR-0"}}
		err := k8sClient.Create(ctx, noNote)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("a debit (negative amount) needs a note"))
		blankNote := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blank-note"},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: -10, Reference: "CORR-0", Note: " \t "}}
		err = k8sClient.Create(ctx, blankNote)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("a debit (negative amount) needs a note"))

		tooMuch := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "too-much"},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: -150, Reference: "CORR-1", Note: "refund of a double invoice"}}
		Expect(k8sClient.Create(ctx, tooMuch)).To(Succeed())
		Eventually(appliedReason(tooMuch)).Should(Equal(videogenv1alpha1.ReasonDebitExceedsBalance))
		Expect(topUpOf(tooMuch).Status.AccountUID).To(Equal(suite.AccountOf(ns).UID))

		debit := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "debit"},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: -40, Reference: "CORR-2", Note: "refund of a double invoice"}}
		Expect(k8sClient.Create(ctx, debit)).To(Succeed())
		Eventually(appliedReason(debit)).Should(Equal(videogenv1alpha1.ReasonDebited))
		Expect(*topUpOf(debit).Status.BalanceAfter).To(Equal(int64(60)))
		suite.ExpectBalanced(ns, 60, 0, 0)
		Expect(suite.AccountOf(ns).Status.Credited).To(Equal(int64(60)))
	})

	// A GitOps sync (or one kubectl apply) of a new account's credits and a debit: the debit
	// was refused for good, "exceeds the 0 points available", when its reconcile came first.
	It("decides a debit made with its credits after them, in the order they were made", func() {
		ns := suite.NewAccount(0)
		credit := suite.TopUp(ns, "inv-1", 500)
		debit := suite.TopUp(ns, "corr-1", -50)
		Eventually(appliedReason(debit)).Should(Equal(videogenv1alpha1.ReasonDebited))
		Expect(appliedReason(credit)()).To(Equal(videogenv1alpha1.ReasonCredited))
		suite.ExpectBalanced(ns, 450, 0, 0)
	})

	It("cannot be deleted or edited once applied", func() {
		ns := suite.NewAccount(0)
		t := suite.TopUp(ns, "kept", 70)
		Eventually(appliedReason(t)).Should(Equal(videogenv1alpha1.ReasonCredited))
		err := k8sClient.Delete(ctx, topUpOf(t))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("part of the account's audit trail"))
		edited := topUpOf(t)
		edited.Spec.Amount = 7000
		Expect(apierrors.IsInvalid(k8sClient.Update(ctx, edited))).To(BeTrue())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(t), &videogenv1alpha1.PointTopUp{})).To(Succeed())

		// Clearing or rewriting what its status says of the application is refused too: with
		// appliedAt gone, the delete policy would let it go.
		for name, edit := range map[string]func(*videogenv1alpha1.PointTopUpStatus){
			"cleared": func(s *videogenv1alpha1.PointTopUpStatus) { *s = videogenv1alpha1.PointTopUpStatus{} },
			"appliedAt moved": func(s *videogenv1alpha1.PointTopUpStatus) {
				s.AppliedAt = &metav1.Time{Time: s.AppliedAt.Add(-time.Hour)}
			},
			"balance changed": func(s *videogenv1alpha1.PointTopUpStatus) { s.BalanceAfter = ptr.To(*s.BalanceAfter + 1) },
			"balance dropped": func(s *videogenv1alpha1.PointTopUpStatus) { s.BalanceAfter = nil },
			"account changed": func(s *videogenv1alpha1.PointTopUpStatus) { s.AccountUID = "another" },
		} {
			edited := topUpOf(t)
			edit(&edited.Status)
			err := k8sClient.Status().Update(ctx, edited)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", name, err)
			Expect(err.Error()).To(ContainSubstring("part of the audit trail"), name)
		}
		Expect(topUpOf(t).Status.AppliedAt).NotTo(BeNil())
		Expect(k8sClient.Delete(ctx, topUpOf(t))).NotTo(Succeed())
	})

	It("waits for the account and applies once it exists", func() {
		ns := suite.NewAccount(0)
		Expect(k8sClient.Delete(ctx, suite.AccountOf(ns))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: videogenv1alpha1.PointAccountName}, &videogenv1alpha1.PointAccount{}))
		}).Should(BeTrue())
		t := suite.TopUp(ns, "early", 40)
		Eventually(appliedReason(t)).Should(Equal(videogenv1alpha1.ReasonAccountNotFound))
		// Not applied yet, it may be credited at any moment (an account can come): it stays,
		// or a credit could land whose reference a later manager would not know.
		err := k8sClient.Delete(ctx, topUpOf(t))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("may be being credited"))

		acct := &videogenv1alpha1.PointAccount{}
		acct.Namespace, acct.Name = ns, videogenv1alpha1.PointAccountName
		Expect(k8sClient.Create(ctx, acct)).To(Succeed())
		suite.ExpectBalanced(ns, 40, 0, 0)
		Eventually(func() int { return len(suite.AccountOf(ns).Status.Journal) }).Should(BeZero())
	})
})

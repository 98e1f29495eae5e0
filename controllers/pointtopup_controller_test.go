package controllers_test

import (
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/ledger"
)

// topUpReconciler is a PointTopUp reconciler of its own, as if in another manager process.
func topUpReconciler() *controllers.PointTopUpReconciler {
	return &controllers.PointTopUpReconciler{
		Client: k8sClient, APIReader: k8sClient,
		Ledger:   ledger.New(k8sClient, k8sClient),
		Recorder: events.NewFakeRecorder(100),
		Clock:    clocktesting.NewFakePassiveClock(timeNow()),
	}
}

var _ = Describe("PointTopUp", func() {
	It("credits exactly once when reconciled many times, concurrently and again afterwards", func() {
		ns := newAccount(0)
		t := topUp(ns, "inv-7", 500)
		req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(t)}

		var wg sync.WaitGroup
		for range 5 {
			r := topUpReconciler()
			wg.Go(func() {
				defer GinkgoRecover()
				// A reconcile that loses the status-write race reports a conflict and would be
				// retried; the credit itself must still happen once.
				_, _ = r.Reconcile(ctx, req)
			})
		}
		wg.Wait()
		for range 2 {
			_, err := topUpReconciler().Reconcile(ctx, req)
			Expect(err).NotTo(HaveOccurred())
		}

		st := accountOf(ns).Status
		Expect(ledger.Check(&st)).To(Succeed())
		Expect(st.Credited).To(Equal(int64(500)))
		Expect(st.Balance).To(Equal(int64(500)))
		applied := &videogenv1alpha1.PointTopUp{}
		Expect(k8sClient.Get(ctx, req.NamespacedName, applied)).To(Succeed())
		Expect(applied.Status.AppliedAt).NotTo(BeNil())
		Expect(*applied.Status.BalanceAfter).To(Equal(int64(500)))
		Expect(meta.IsStatusConditionTrue(applied.Status.Conditions, videogenv1alpha1.ConditionApplied)).To(BeTrue())
	})

	It("finishes a credit interrupted before its status was written without crediting twice", func() {
		ns := newAccount(0)
		t := topUp(ns, "inv-8", 300)
		// The first reconcile credited the account and died before writing the top-up's status.
		_, err := ledger.New(k8sClient, k8sClient).Do(ctx, ns, ledger.TopUp(t.Name, string(t.UID), t.Spec.Amount))
		Expect(err).NotTo(HaveOccurred())

		_, err = topUpReconciler().Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(t)})
		Expect(err).NotTo(HaveOccurred())
		Expect(accountOf(ns).Status.Credited).To(Equal(int64(300)))
	})

	It("waits for the account and applies once it exists", func() {
		backend := testbackend.New()
		stop := startManager(testOptions(backend))
		defer stop()

		ns := newAccount(0)
		Expect(k8sClient.Delete(ctx, accountOf(ns))).To(Succeed())
		t := topUp(ns, "early", 40)
		Eventually(func() string {
			got := &videogenv1alpha1.PointTopUp{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(t), got)).To(Succeed())
			if c := meta.FindStatusCondition(got.Status.Conditions, videogenv1alpha1.ConditionApplied); c != nil {
				return c.Reason
			}
			return ""
		}).Should(Equal(videogenv1alpha1.ReasonAccountNotFound))

		acct := &videogenv1alpha1.PointAccount{}
		acct.Namespace, acct.Name = ns, videogenv1alpha1.PointAccountName
		Expect(k8sClient.Create(ctx, acct)).To(Succeed())
		expectBalanced(ns, 40, 0, 0)
		// The ledger's record of the credit is trimmed once the top-up shows it.
		Eventually(func() int { return len(accountOf(ns).Status.TopUps) }).Should(BeZero())
	})
})

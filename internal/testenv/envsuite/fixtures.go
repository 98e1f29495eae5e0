package envsuite

import (
	"fmt"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// The account fixtures every suite that moves points uses: an account is a namespace with its
// PointAccount, credited through a PointTopUp as an administrator would.

var seq atomic.Int64

// Unique returns prefix with a number no other call in this process returned.
func Unique(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// NewAccount makes a namespace with a PointAccount, tops it up by balance, waits until the
// balance shows it, and returns the namespace.
func (e *Env) NewAccount(balance int64) string {
	GinkgoHelper()
	ns := Unique("acct")
	Expect(e.Client.Create(e.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	Expect(e.Client.Create(e.Ctx, &videogenv1alpha1.PointAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: videogenv1alpha1.PointAccountName},
	})).To(Succeed())
	if balance > 0 {
		e.TopUp(ns, "initial", balance)
		Eventually(func() int64 { return e.AccountOf(ns).Status.Balance }).Should(Equal(balance))
	}
	return ns
}

// TopUp creates a PointTopUp of amount named name (reference INV-<name>; a debit gets a note)
// and returns it without waiting.
func (e *Env) TopUp(ns, name string, amount int64) *videogenv1alpha1.PointTopUp {
	GinkgoHelper()
	t := &videogenv1alpha1.PointTopUp{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       videogenv1alpha1.PointTopUpSpec{Amount: amount, Reference: "INV-" + name},
	}
	if amount < 0 {
		t.Spec.Note = "a test debit"
	}
	Expect(e.Client.Create(e.Ctx, t)).To(Succeed())
	return t
}

// Applied waits until the top-up t is applied.
func (e *Env) Applied(t *videogenv1alpha1.PointTopUp) {
	GinkgoHelper()
	Eventually(func(g Gomega) *metav1.Time {
		got := &videogenv1alpha1.PointTopUp{}
		g.Expect(e.Client.Get(e.Ctx, client.ObjectKeyFromObject(t), got)).To(Succeed())
		return got.Status.AppliedAt
	}).ShouldNot(BeNil())
}

// AccountOf reads ns's PointAccount from the kube-apiserver.
func (e *Env) AccountOf(ns string) *videogenv1alpha1.PointAccount {
	GinkgoHelper()
	a := &videogenv1alpha1.PointAccount{}
	Expect(e.Client.Get(e.Ctx, client.ObjectKey{Namespace: ns, Name: videogenv1alpha1.PointAccountName}, a)).To(Succeed())
	return a
}

// ExpectBalanced waits until ns's account shows balance, frozen and spent, and checks that
// they add up to what was credited.
func (e *Env) ExpectBalanced(ns string, balance, frozen, spent int64) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		st := e.AccountOf(ns).Status
		g.Expect(st.Credited).To(Equal(st.Balance+st.Frozen+st.Spent), "credited = balance + frozen + spent")
		g.Expect([]int64{st.Balance, st.Frozen, st.Spent}).To(Equal([]int64{balance, frozen, spent}), "balance, frozen, spent")
	}).Should(Succeed())
}

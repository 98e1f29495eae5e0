package controllers_test

import (
	"fmt"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

var seq atomic.Int64

func unique(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// newAccount makes a namespace with a PointAccount and tops it up by balance through a
// PointTopUp, waiting until the controller credited it.
func newAccount(balance int64) string {
	ns := unique("acct")
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	Expect(k8sClient.Create(ctx, &videogenv1alpha1.PointAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: videogenv1alpha1.PointAccountName},
	})).To(Succeed())
	if balance > 0 {
		topUp(ns, "initial", balance)
		Eventually(func() int64 { return accountOf(ns).Status.Balance }).Should(Equal(balance))
	}
	return ns
}

func topUp(ns, name string, amount int64) *videogenv1alpha1.PointTopUp {
	t := &videogenv1alpha1.PointTopUp{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       videogenv1alpha1.PointTopUpSpec{Amount: amount, Reference: "INV-" + name},
	}
	if amount < 0 {
		t.Spec.Note = "a test debit"
	}
	Expect(k8sClient.Create(ctx, t)).To(Succeed())
	return t
}

func accountOf(ns string) *videogenv1alpha1.PointAccount {
	a := &videogenv1alpha1.PointAccount{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: videogenv1alpha1.PointAccountName}, a)).To(Succeed())
	return a
}

// expectBalanced asserts the ledger invariants and the figures of an account.
func expectBalanced(ns string, balance, frozen, spent int64) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		st := accountOf(ns).Status
		g.Expect(st.Credited).To(Equal(st.Balance+st.Frozen+st.Spent), "credited = balance + frozen + spent")
		g.Expect([]int64{st.Balance, st.Frozen, st.Spent}).To(Equal([]int64{balance, frozen, spent}),
			"balance, frozen, spent")
	}).Should(Succeed())
}

// templateBuilder makes official Templates.
type templateBuilder struct{ t videogenv1alpha1.Template }

func aTemplate(capability videogenv1alpha1.Capability) *templateBuilder {
	return &templateBuilder{t: videogenv1alpha1.Template{
		ObjectMeta: metav1.ObjectMeta{Name: unique("tmpl")},
		Spec: videogenv1alpha1.TemplateSpec{Capability: capability, DisplayName: "Test template",
			MediaURL: "https://media.example/template.mp4"},
	}}
}

func (b *templateBuilder) Price(p int64) *templateBuilder { b.t.Spec.Price = ptr.To(p); return b }

func (b *templateBuilder) Adjustable(lo, hi int32, prices map[string]int64) *templateBuilder {
	b.t.Spec.DurationAdjustable = true
	b.t.Spec.MinDuration, b.t.Spec.MaxDuration = ptr.To(lo), ptr.To(hi)
	b.t.Spec.DurationPrices = prices
	return b
}

func (b *templateBuilder) Create() string {
	Expect(k8sClient.Create(ctx, &b.t)).To(Succeed())
	return b.t.Name
}

// taskBuilder makes VideoTasks.
type taskBuilder struct{ t videogenv1alpha1.VideoTask }

func aShortTask(ns, template string) *taskBuilder {
	return &taskBuilder{t: videogenv1alpha1.VideoTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: unique("task")},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityShort, TemplateRef: template,
			Inputs: videogenv1alpha1.TaskInputs{FaceImageURL: "https://media.example/face.jpg"}},
	}}
}

func (b *taskBuilder) Capability(c videogenv1alpha1.Capability) *taskBuilder {
	b.t.Spec.Capability = c
	return b
}

func (b *taskBuilder) Duration(d int32) *taskBuilder { b.t.Spec.Duration = ptr.To(d); return b }

func (b *taskBuilder) Timeout(d time.Duration) *taskBuilder {
	b.t.Spec.Timeout = &metav1.Duration{Duration: d}
	return b
}

func (b *taskBuilder) Name() string { return b.t.Name }

func (b *taskBuilder) Obj() *videogenv1alpha1.VideoTask { return b.t.DeepCopy() }

func (b *taskBuilder) Create() *videogenv1alpha1.VideoTask {
	t := b.t.DeepCopy()
	Expect(k8sClient.Create(ctx, t)).To(Succeed())
	return t
}

func taskOf(ns, name string) *videogenv1alpha1.VideoTask {
	t := &videogenv1alpha1.VideoTask{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, t)).To(Succeed())
	return t
}

// finished waits until the task is terminal with its points settled (or never charged).
func finished(ns, name string) *videogenv1alpha1.VideoTask {
	var t *videogenv1alpha1.VideoTask
	Eventually(func(g Gomega) {
		t = taskOf(ns, name)
		g.Expect(t.Status.Phase.Terminal()).To(BeTrue(), "phase %q", t.Status.Phase)
		g.Expect(t.Status.Charge).NotTo(Equal(videogenv1alpha1.ChargeFrozen))
	}).Should(Succeed())
	return t
}

func timeNow() time.Time { return time.Now() }

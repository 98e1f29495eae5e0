package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/ledger"
)

var _ = Describe("PointAccount", func() {
	var stop func()
	var backend *testbackend.Backend
	BeforeEach(func() {
		backend = testbackend.New()
		stop = startManager(testOptions(backend))
	})
	AfterEach(func() { stop() })

	It("refunds a hold whose task never appears once the grace period has passed", func() {
		ns := newAccount(100)
		// As the REST apiserver does: freeze first, then (here: never) create the task.
		_, err := ledger.New(k8sClient, k8sClient).Do(ctx, ns, ledger.Freeze("never-created", 35))
		Expect(err).NotTo(HaveOccurred())
		expectBalanced(ns, 65, 35, 0)
		// Not before the 2s grace period of the test options (counted from when the controller
		// first saw the hold without its task, so at least 2s after the freeze)...
		Consistently(func() int64 { return accountOf(ns).Status.Frozen }, "1500ms").Should(Equal(int64(35)))
		expectBalanced(ns, 100, 0, 0) // ...but soon after it
		Eventually(func() []string { return eventReasons(ns, videogenv1alpha1.PointAccountName) }).Should(ContainElement("HoldReleased"))
		Eventually(func() int { return len(accountOf(ns).Status.Settlements) }).Should(BeZero())
	})

	It("keeps a hold whose task exists, even past the grace period", func() {
		ns := newAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		b := aShortTask(ns, tmpl)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		b.Create()
		expectBalanced(ns, 80, 20, 0)
		Consistently(func() int64 { return accountOf(ns).Status.Frozen }, "3s").Should(Equal(int64(20)))
	})

	It("refunds the points of a running task that is deleted, without waiting for the grace period", func() {
		stop()
		opts := testOptions(backend)
		opts.HoldGracePeriod = time.Hour // a hold whose task is merely missing would wait this long
		stop = startManager(opts)
		ns := newAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		b := aShortTask(ns, tmpl)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()
		expectBalanced(ns, 80, 20, 0)
		Expect(k8sClient.Delete(ctx, task)).To(Succeed())
		expectBalanced(ns, 100, 0, 0)
	})

	It("settles the hold of a task whose status says it ended, when the settle never reached the account", func() {
		// As a manager that died right after a task's last status write leaves things: the
		// status says where the points go, the hold is still in the account.
		stop()
		ns := newAccount(0)
		l := ledger.New(k8sClient, k8sClient)
		_, err := l.Do(ctx, ns, ledger.TopUp("seed", "seed-uid", 100))
		Expect(err).NotTo(HaveOccurred())
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		ended := func(phase videogenv1alpha1.TaskPhase, charge videogenv1alpha1.ChargeState, held int64, webhook string) string {
			b := aShortTask(ns, tmpl)
			if webhook != "" {
				b.t.Spec.WebhookURL = webhook
			}
			t := b.Create()
			_, err := l.Do(ctx, ns, ledger.Freeze(t.Name, held))
			Expect(err).NotTo(HaveOccurred())
			at := metav1.Now()
			t.Status.Phase, t.Status.Charge, t.Status.Cost, t.Status.CompletedAt = phase, charge, ptr.To(held), &at
			t.Status.Closed = webhook == ""
			Expect(k8sClient.Status().Update(ctx, t)).To(Succeed())
			return t.Name
		}
		ended(videogenv1alpha1.TaskSucceeded, videogenv1alpha1.ChargeDeducted, 20, "")
		// Its completion webhook is still due, so it stays open (and cached).
		ended(videogenv1alpha1.TaskFailed, videogenv1alpha1.ChargeRefunded, 30, "http://127.0.0.1:9/unreachable")
		// Ended saying nothing was charged: a hold under its name is not its charge.
		ended(videogenv1alpha1.TaskFailed, "", 15, "")
		expectBalanced(ns, 35, 65, 0)

		stop = startManager(testOptions(backend))
		expectBalanced(ns, 80, 0, 20)
		Eventually(func() []string { return eventReasons(ns, videogenv1alpha1.PointAccountName) }).Should(ContainElements("HoldSettled", "HoldReleased"))
		Eventually(func() int { return len(accountOf(ns).Status.Settlements) }).Should(BeZero())
	})

	It("trims settlement records once tasks show their settlement", func() {
		ns := newAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(5).Create()
		for range 5 {
			aShortTask(ns, tmpl).Create()
		}
		expectBalanced(ns, 75, 0, 25)
		Eventually(func() int { return len(accountOf(ns).Status.Settlements) }).Should(BeZero())
	})

	It("reports Ready and Funded conditions, and Suspended accounts take no new tasks", func() {
		ns := newAccount(10)
		Eventually(func(g Gomega) {
			a := accountOf(ns)
			g.Expect(meta.IsStatusConditionTrue(a.Status.Conditions, videogenv1alpha1.ConditionReady)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(a.Status.Conditions, videogenv1alpha1.ConditionFunded)).To(BeTrue())
			g.Expect(a.Status.ObservedGeneration).To(Equal(a.Generation))
		}).Should(Succeed())

		a := accountOf(ns)
		patch := client.MergeFrom(a.DeepCopy())
		a.Spec.Suspended = true
		Expect(k8sClient.Patch(ctx, a, patch)).To(Succeed())
		Eventually(func() string {
			c := meta.FindStatusCondition(accountOf(ns).Status.Conditions, videogenv1alpha1.ConditionReady)
			return c.Reason
		}).Should(Equal(videogenv1alpha1.ReasonSuspended))

		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(5).Create()
		done := finished(ns, aShortTask(ns, tmpl).Create().Name)
		Expect(done.Status.Error.Code).To(Equal("account_suspended"))
		expectBalanced(ns, 10, 0, 0)
	})

	It("says Funded=False when the balance is spent", func() {
		ns := newAccount(10)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		finished(ns, aShortTask(ns, tmpl).Create().Name)
		Eventually(func() string {
			c := meta.FindStatusCondition(accountOf(ns).Status.Conditions, videogenv1alpha1.ConditionFunded)
			if c == nil {
				return ""
			}
			return c.Reason
		}).Should(Equal(videogenv1alpha1.ReasonDepleted))
	})
})

package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

var _ = Describe("PointAccount", func() {
	var stop func()
	var backend *testbackend.Backend
	BeforeEach(func() {
		backend = testbackend.New()
		stop = startManager(testOptions(backend))
	})
	AfterEach(func() { stop() })

	It("shows a running task's hold, and empties its journal once tasks show their charge", func() {
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(5).Create()
		hang := aShortTask(ns, tmpl)
		backend.Set(hang.Name(), testbackend.Script{Analyze: testbackend.Hang})
		hang.Create()
		for range 5 {
			aShortTask(ns, tmpl).Create()
		}
		suite.ExpectBalanced(ns, 70, 5, 25)
		Eventually(func() []int64 {
			st := suite.AccountOf(ns).Status
			return []int64{int64(st.Holds), int64(len(st.Journal))}
		}).Should(Equal([]int64{1, 0}))
	})

	It("reports Ready and Funded conditions, and Suspended accounts take no new tasks", func() {
		ns := suite.NewAccount(10)
		Eventually(func(g Gomega) {
			a := suite.AccountOf(ns)
			g.Expect(meta.IsStatusConditionTrue(a.Status.Conditions, videogenv1alpha1.ConditionReady)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(a.Status.Conditions, videogenv1alpha1.ConditionFunded)).To(BeTrue())
			g.Expect(a.Status.ObservedGeneration).To(Equal(a.Generation))
		}).Should(Succeed())

		a := suite.AccountOf(ns)
		patch := client.MergeFrom(a.DeepCopy())
		a.Spec.Suspended = true
		Expect(k8sClient.Patch(ctx, a, patch)).To(Succeed())
		Eventually(func() string {
			c := meta.FindStatusCondition(suite.AccountOf(ns).Status.Conditions, videogenv1alpha1.ConditionReady)
			return c.Reason
		}).Should(Equal(videogenv1alpha1.ReasonSuspended))

		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(5).Create()
		done := finished(ns, aShortTask(ns, tmpl).Create().Name)
		Expect(done.Status.Error.Code).To(Equal("account_suspended"))
		suite.ExpectBalanced(ns, 10, 0, 0)
	})

	It("says Funded=False when the balance is spent", func() {
		ns := suite.NewAccount(10)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		finished(ns, aShortTask(ns, tmpl).Create().Name)
		Eventually(func() string {
			c := meta.FindStatusCondition(suite.AccountOf(ns).Status.Conditions, videogenv1alpha1.ConditionFunded)
			if c == nil {
				return ""
			}
			return c.Reason
		}).Should(Equal(videogenv1alpha1.ReasonDepleted))
	})

	It("refuses to delete an account with points or holds, and lets it go once emptied", func() {
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		b := aShortTask(ns, tmpl)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()
		suite.ExpectBalanced(ns, 80, 20, 0)
		Eventually(func() []string { return suite.AccountOf(ns).Finalizers }).Should(ContainElement(videogenv1alpha1.FinalizerLedger))

		// The admission policy says why at once.
		err := k8sClient.Delete(ctx, suite.AccountOf(ns))
		Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("80 points available and 1 tasks holding 20 points"))
		// Its tasks first: canceled, a task refunds its hold, so a debit of 80 now would leave 20.
		Expect(err.Error()).To(ContainSubstring("cancel or wait for its tasks first (videogenctl task list -n " + ns))
		Expect(err.Error()).To(ContainSubstring("then debit what is left (videogenctl account show " + ns + " says it; videogenctl topup " + ns + " AMOUNT --debit --reference REF --note WHY), then delete it"))
		Expect(err.Error()).NotTo(ContainSubstring("amount -80"))
		Expect(err.Error()).To(HaveSuffix("; videogenctl account close " + ns + " --reference REF --cancel-tasks runs these steps"))

		// The finalizer keeps it even without the policy's figures (as when the summary lags):
		// cancel the task, debit the balance, and it goes.
		patch := client.MergeFrom(task.DeepCopy())
		task.Annotations = map[string]string{videogenv1alpha1.AnnotationCancelRequested: "true"}
		Expect(k8sClient.Patch(ctx, task, patch)).To(Succeed())
		suite.ExpectBalanced(ns, 100, 0, 0)
		debit := suite.TopUp(ns, "close", -100)
		Eventually(func() *int64 { return topUpOf(debit).Status.BalanceAfter }).ShouldNot(BeNil())
		suite.ExpectBalanced(ns, 0, 0, 0)
		Eventually(func() int { return len(suite.AccountOf(ns).Status.Journal) }).Should(BeZero())
		Expect(k8sClient.Delete(ctx, suite.AccountOf(ns))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: videogenv1alpha1.PointAccountName}, &videogenv1alpha1.PointAccount{}))
		}).Should(BeTrue())
	})

	It("says only the steps left to close an account: no debit of 0 points, no tasks when none hold any", func() {
		// Every point held by a task: the balance is 0, and a debit of 0 points is a
		// PointTopUp the API refuses, so the refusal names only the tasks.
		held := suite.NewAccount(20)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		b := aShortTask(held, tmpl)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		b.Create()
		suite.ExpectBalanced(held, 0, 20, 0)
		Eventually(func() int32 { return suite.AccountOf(held).Status.Holds }).Should(BeEquivalentTo(1))
		err := k8sClient.Delete(ctx, suite.AccountOf(held))
		Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("0 points available and 1 tasks holding 20 points"))
		Expect(err.Error()).NotTo(ContainSubstring("amount 0"))
		Expect(err.Error()).NotTo(ContainSubstring("videogenctl topup " + held + " 0"))
		Expect(err.Error()).To(ContainSubstring("to close it, cancel or wait for its tasks first (videogenctl task list -n " + held))

		// Points and no task: debiting them is all there is to do.
		funded := suite.NewAccount(30)
		suite.ExpectBalanced(funded, 30, 0, 0)
		err = k8sClient.Delete(ctx, suite.AccountOf(funded))
		Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("videogenctl topup " + funded + " 30 --debit --reference REF --note WHY), then delete it"))
		Expect(err.Error()).NotTo(ContainSubstring("cancel"))
		Expect(err.Error()).To(HaveSuffix("; videogenctl account close " + funded + " --reference REF runs these steps"))
	})

	It("lets an empty account go at once; its namespace then takes no task", func() {
		ns := suite.NewAccount(0)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		Eventually(func() []string { return suite.AccountOf(ns).Finalizers }).Should(ContainElement(videogenv1alpha1.FinalizerLedger))
		points := map[string]string{"namespace": ns}
		Eventually(func() int { return metricSeries("videogen_account_points", points) }).Should(Equal(4))
		Expect(k8sClient.Delete(ctx, suite.AccountOf(ns))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: videogenv1alpha1.PointAccountName}, &videogenv1alpha1.PointAccount{}))
		}).Should(BeTrue())
		Eventually(func() []string { return eventReasons(ns, videogenv1alpha1.PointAccountName) }).Should(ContainElement("Closed"))
		// A closed account is no longer exported: a dashboard would list it for as long as the
		// manager runs.
		Eventually(func() int { return metricSeries("videogen_account_points", points) }).Should(BeZero())
		done := finished(ns, aShortTask(ns, tmpl).Create().Name)
		// Refused either way, nothing frozen: "closing" while the ledger's informer has not yet
		// seen the account go (milliseconds after the delete), "not found" after.
		Expect(done.Status.Error.Code).To(BeElementOf("account_not_found", "account_closing"))
		Expect(done.Status.Charge).NotTo(Equal(videogenv1alpha1.ChargeDeducted))
	})
})

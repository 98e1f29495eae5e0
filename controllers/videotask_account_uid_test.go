package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// An auditor reading tasks after an account was closed and created again in its namespace
// must tell which account each task was charged to: the acceptance records it.
var _ = Describe("VideoTask: the account its points are frozen in", func() {
	It("is recorded at acceptance for a REST task and never changes", func() {
		ns, l := accountWithALedger(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		running := aShortTask(ns, tmpl)
		backend := testbackend.New()
		backend.Set(running.Name(), testbackend.Script{Analyze: testbackend.Hang})
		r := directReconciler(k8sClient, l, backend)
		var task *videogenv1alpha1.VideoTask
		Eventually(func(g Gomega) {
			var err error
			task, err = l.CreateTask(ctx, running.Obj(), 20)
			g.Expect(err).NotTo(HaveOccurred())
		}).Should(Succeed())

		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Charge).To(Equal(videogenv1alpha1.ChargeFrozen))
		}).Should(Succeed())
		account := suite.AccountOf(ns)
		Expect(taskOf(ns, task.Name).Status.AccountUID).To(Equal(account.UID))

		edited := taskOf(ns, task.Name)
		edited.Status.AccountUID = "another-account"
		Expect(k8sClient.Status().Update(ctx, edited)).To(MatchError(ContainSubstring("accountUID is the account the task's points were frozen in and never changes")))
		edited = taskOf(ns, task.Name)
		edited.Status.AccountUID = ""
		Expect(k8sClient.Status().Update(ctx, edited)).To(MatchError(ContainSubstring("accountUID is the account")))
	})
})

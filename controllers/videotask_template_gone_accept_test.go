package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// A REST task is answered 202 (queued, its price frozen) before the controller accepts it. Its
// template deleted in between went away from under a task the customer was told runs, as one
// deleted a moment later does: it ends as that one does (TemplateUnavailable,
// template_unavailable, refunded), not as a request for a template that never existed
// (InvalidRequest, template_not_found), which the customer did not send.
var _ = Describe("VideoTask: a REST task's template deleted before its acceptance", func() {
	It("ends TemplateUnavailable, refunded, as one deleted while the task runs", func() {
		ns, l := accountWithALedger(100)
		r := directReconciler(k8sClient, l, testbackend.New())
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		var task *videogenv1alpha1.VideoTask
		Eventually(func(g Gomega) {
			var err error
			task, err = l.CreateTask(ctx, aShortTask(ns, tmpl).Obj(), 20)
			g.Expect(err).NotTo(HaveOccurred())
		}).Should(Succeed())
		Expect(k8sClient.Delete(ctx, &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: tmpl}})).To(Succeed())

		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		}).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
		Expect(done.Status.AccountUID).To(Equal(suite.AccountOf(ns).UID), "the account its points were frozen in, and refunded to")
		Expect(done.Status.Error.Code).To(Equal("template_unavailable"))
		Expect(done.Status.Ending()).To(HaveField("Reason", videogenv1alpha1.ReasonTemplateUnavailable))
		Expect(done.Status.Error.Message).To(ContainSubstring("template went away"))
		Eventually(func(g Gomega) {
			figures, err := l.Balance(ctx, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(figures.Frozen).To(BeZero(), "the hold ended")
		}).Should(Succeed())
	})
})

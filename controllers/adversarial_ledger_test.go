package controllers_test

import (
	"context"
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// Adversarial round 9, end to end: the controller's fast path (a kubectl task whose backend
// answers at once is charged before any status write records its hold) and a manager that dies
// after the charge lands, before its Succeeded/Deducted write. The new manager finishes the
// task from the journal entry, but prices it from the task's empty status: cost 0, while the
// account spent the price. See internal/ledger/adversarial9_internal_test.go
// (TestAChargeFinishedByANewManagerCarriesItsPriceIntoTheTasksCost) for the step by step.
var _ = Describe("Adversarial: the controller under crashes (round 9)", func() {
	It("ends a fast kubectl task charged by a dead manager with the cost it was charged", func() {
		backend := testbackend.New()
		opts := testOptions(backend)
		// The first manager "dies" right after its charge lands: none of its task status
		// writes reaches the kube-apiserver (its account writes do).
		first := startManager(opts, intercepted(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, o ...client.SubResourceUpdateOption) error {
				if _, ok := obj.(*videogenv1alpha1.VideoTask); ok {
					return errors.New("injected: the manager died before this write")
				}
				return c.SubResource(sub).Update(ctx, obj, o...)
			},
		}))
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		b := aShortTask(ns, tmpl)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Succeed, Render: testbackend.Succeed}) // answers at once
		task := b.Create()
		Eventually(func() int64 { return suite.AccountOf(ns).Status.Spent }).Should(Equal(int64(10)), "the first manager's charge lands")
		Expect(taskOf(ns, task.Name).Status.Charge).To(BeEmpty(), "no status of the first manager landed")
		first()

		startManager(opts)
		done := finished(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded))
		Eventually(func(g Gomega) {
			st := suite.AccountOf(ns).Status
			g.Expect(st.Journal).To(BeEmpty())
			g.Expect(st.Spent).To(Equal(int64(10)))
		}).Should(Succeed())
		Expect(done.Status.Cost).NotTo(BeNil())
		Expect(*done.Status.Cost).To(Equal(int64(10)), "the task ends Succeeded, Deducted with cost %d while the account spent 10 for it", *done.Status.Cost)
	})
})

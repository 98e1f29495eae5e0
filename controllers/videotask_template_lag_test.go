package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/generation"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/ledger"
)

var _ = Describe("VideoTask acceptance", func() {
	It("does not fail a task for a template its cache has not seen yet", func() {
		ns := newAccount(0) // no manager runs here: the ledger tops up
		_, err := ledger.New(k8sClient, k8sClient).Do(ctx, ns, ledger.TopUp("seed", "seed-uid", 100))
		Expect(err).NotTo(HaveOccurred())
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		b := aShortTask(ns, tmpl)
		backend := testbackend.New()
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()

		// A cache that has not seen the template yet (created a moment before the task).
		lagging := without[*videogenv1alpha1.Template]("templates")
		r := &controllers.VideoTaskReconciler{
			Client: lagging, APIReader: k8sClient, Ledger: ledger.New(k8sClient, k8sClient),
			Backends: generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "test-backend", Backend: backend}},
			Recorder: events.NewFakeRecorder(10), Clock: clocktesting.NewFakePassiveClock(timeNow()),
			Config: controllers.DefaultOptions().Task,
		}
		_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		Expect(err).NotTo(HaveOccurred())
		got := taskOf(ns, task.Name)
		Expect(got.Status.Phase).To(Equal(videogenv1alpha1.TaskRunning), "accepted and dispatched, not failed with template_not_found")
		Expect(got.Status.Charge).To(Equal(videogenv1alpha1.ChargeFrozen))
	})
})

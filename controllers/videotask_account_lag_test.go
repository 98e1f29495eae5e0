package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/watchlag"
)

var _ = Describe("A task made right after its account", func() {
	// kubectl apply of an account and a task together: the ledger learns of the account from
	// its informer, which here has not brought it yet. The task must wait, not fail for good
	// with account_not_found.
	It("waits for the ledger to see the account instead of failing", func() {
		lagOpts := cache.Options{ByObject: controllers.CacheByObject(), NewInformer: watchlag.NewInformer(3 * time.Second)}
		l, stopLedger := startLedgerWithCache(lagOpts)
		defer stopLedger()

		ns := accountWithoutController(100) // made after the ledger started: only its late event tells
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		task := aShortTask(ns, tmpl).Create()
		r := directReconciler(k8sClient, l, testbackend.New())
		key := client.ObjectKeyFromObject(task)

		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.RequeueAfter).To(BeNumerically(">", 0), "asked again shortly")
		Expect(taskOf(ns, task.Name).Status.Phase).NotTo(Equal(videogenv1alpha1.TaskFailed))

		// Once the account's event reaches the ledger, the task is accepted and runs.
		Eventually(func() videogenv1alpha1.TaskPhase {
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
			Expect(err).NotTo(HaveOccurred())
			return taskOf(ns, task.Name).Status.Phase
		}).WithTimeout(15 * time.Second).Should(Equal(videogenv1alpha1.TaskSucceeded))
		Expect(taskOf(ns, task.Name).Status.Charge).To(Equal(videogenv1alpha1.ChargeDeducted))
	})
})

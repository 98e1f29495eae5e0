package controllers_test

import (
	"context"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// A task's acceptance, seen through the ledger.
var _ = Describe("A task's acceptance", func() {
	var (
		l          *ledger.Ledger
		stopLedger func()
		backend    *downBackend
		ns         string
	)
	BeforeEach(func() {
		ns = accountWithoutController(100)
		l, stopLedger = startLedger()
		DeferCleanup(stopLedger)
		backend = &downBackend{Backend: testbackend.New()}
	})

	// What breaks: a kubectl task's acceptance is one status write made after its first stage
	// was submitted (advance: Submit, then writeIfChanged). When that write conflicts, accept
	// takes the hold back (Unadmit) — but the stage was submitted, and nothing records it: no
	// handle in the status, no finalizer. If the next reconcile cannot admit the task (the
	// balance went to another task meanwhile, the account was suspended or is being deleted,
	// the template went away), reject ends it Failed and cancels only the stages its status
	// says run (cancelRunningStages): none. The work submitted under the stage's key runs on at
	// the backend, for a task that was never charged and never will be: compute run unpaid, to
	// the stage's own deadline (the task's timeout plus a minute). advance's own "no handle
	// yet" branch (a cancel after a Submit whose status write was lost) asks the backend to
	// stop such work by its key; reject does not.
	//
	// Steps, each a real reconcile against envtest, forced in this order:
	//  1. Two kubectl tasks a and b on a template of price 60; the account has 100.
	//  2. a's reconcile: Admit(a, 60); Submit(a's analyze) (the backend takes it); meanwhile the
	//     user labels a (kubectl label: any write of the object between the controller's read
	//     and its status write); the status write conflicts; Unadmit(a).
	//  3. b's reconcile: Admit(b, 60) (100 available), written Frozen, its stage runs.
	//  4. a's reconcile: Admit(a, 60): 40 available → reject, InsufficientBalance.
	//
	// Reachable: a conflict on the acceptance write needs only a write of the task by anybody
	// between the reconcile's read and its write (a label, an annotation, a GitOps tool's apply,
	// the REST API's cancel request); two tasks over a balance that covers one is the everyday
	// case the ledger exists for (so are a suspension and an account being closed). A crash of
	// the manager between step 2's Submit and its status write reaches step 4 the same way.
	// What a user sees: nothing (a is Failed, not charged); the operator pays for a's stage.
	It("stops the stage it submitted when the acceptance write was lost and the task is then refused", func() {
		r := directReconciler(k8sClient, l, backend)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(60).Create()
		ba, bb := aShortTask(ns, tmpl), aShortTask(ns, tmpl)
		backend.Set(ba.Name(), testbackend.Script{Analyze: testbackend.Hang})
		backend.Set(bb.Name(), testbackend.Script{Analyze: testbackend.Hang})
		a, b := ba.Create(), bb.Create()
		keyA := generation.WorkKey(ns, a.Name, string(a.UID), videogenv1alpha1.StageAnalyze)

		// 2. The user labels a while the backend takes its stage.
		var labelled atomic.Bool
		backend.setSubmit(func(context.Context) error {
			if labelled.CompareAndSwap(false, true) {
				t := taskOf(ns, a.Name)
				patch := client.MergeFrom(t.DeepCopy())
				t.Labels = map[string]string{"team": "video"}
				Expect(k8sClient.Patch(ctx, t, patch)).To(Succeed())
			}
			return nil
		})
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, a)
			g.Expect(backend.Submits(keyA)).To(Equal(1))
		}).Should(Succeed())
		Expect(taskOf(ns, a.Name).Status.Charge).To(BeEmpty(), "a's acceptance write conflicted")
		backend.setSubmit(nil)

		// 3. b takes the balance.
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, b)
			g.Expect(taskOf(ns, b.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))
		}).Should(Succeed())

		// 4. a is refused.
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, a)
			g.Expect(taskOf(ns, a.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		}).Should(Succeed())
		done := taskOf(ns, a.Name)
		Expect(done.Status.Error.Code).To(Equal("insufficient_balance"))
		Expect(done.Status.Charge).To(BeEmpty(), "nothing charged")
		Expect(backend.cancelAsked(keyA)).To(BeTrue(),
			"the stage submitted for a refused task was left running at the backend, unpaid")
	})

	// The same for a task the ledger created for the REST API (its create was the freeze, so
	// a lost acceptance write keeps the hold): its first reconcile submits the analyze stage
	// and its status write conflicts (the user labels it); its template is then deleted, and
	// the next reconcile ends it Failed, Refunded (accept's "template went away" branch,
	// finish) without stopping the stage the backend took. The points come back; the backend
	// work runs on for nobody. Reachable as above; a template is deleted by a platform
	// administrator at any time (README: such a task ends template_unavailable, refunded).
	It("stops the stage it submitted when the acceptance write was lost and the REST task's template then went away", func() {
		r := directReconciler(k8sClient, l, backend)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		bt := aShortTask(ns, tmpl)
		backend.Set(bt.Name(), testbackend.Script{Analyze: testbackend.Hang})
		var task *videogenv1alpha1.VideoTask
		Eventually(func(g Gomega) {
			var err error
			task, err = l.CreateTask(ctx, bt.Obj(), 20)
			g.Expect(err).NotTo(HaveOccurred())
		}).Should(Succeed())
		key := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageAnalyze)

		var labelled atomic.Bool
		backend.setSubmit(func(context.Context) error {
			if labelled.CompareAndSwap(false, true) {
				t := taskOf(ns, task.Name)
				patch := client.MergeFrom(t.DeepCopy())
				t.Labels = map[string]string{"team": "video"}
				Expect(k8sClient.Patch(ctx, t, patch)).To(Succeed())
			}
			return nil
		})
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(backend.Submits(key)).To(Equal(1))
		}).Should(Succeed())
		Expect(taskOf(ns, task.Name).Status.Charge).To(BeEmpty(), "the acceptance write conflicted")
		backend.setSubmit(nil)

		Expect(k8sClient.Delete(ctx, &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: tmpl}})).To(Succeed())
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		}).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Error.Code).To(Equal("template_unavailable"))
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
		Expect(backend.cancelAsked(key)).To(BeTrue(),
			"the stage submitted for a task that ended refunded was left running at the backend")
	})
})

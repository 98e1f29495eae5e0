package controllers_test

import (
	"context"
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// The controller's fast path (a kubectl task whose backend
// answers at once is charged before any status write records its hold) and a manager that dies
// after the charge lands, before its Succeeded/Deducted write. The new manager finishes the
// task from the journal entry, but prices it from the task's empty status: cost 0, while the
// account spent the price. See internal/ledger's
// (TestAChargeFinishedByANewManagerCarriesItsPriceIntoTheTasksCost) for the step by step.
var _ = Describe("The controller under crashes", func() {
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

	// What breaks: a task the ledger finds Overdrawn (an admission it did not make and the
	// balance cannot cover: the documented case of a manager that kept acting after it lost its
	// Lease, whose accept write, with the first stage's dispatch, and whose finalizer patch land
	// after the new manager counted the balance away) is refused by reject(), which writes
	// Failed and closed but neither cancels the running stage nor takes the finalizer
	// videogen.dev/cancel-work off. A closed task leaves the manager's cache (CacheByObject), so
	// no reconcile ever sees it again: reconcileFinished, which "takes its finalizer off if a
	// crash left it", never runs. At the TTL the finished-task collector deletes it, and it
	// stays Terminating forever (and so does its namespace, if deleted); its stage runs at the
	// backend to the backend's own deadline.
	//
	// Steps (the earlier manager's landed writes are made by hand here, with no manager running;
	// the new manager then builds its books from them, as after a failover): 1. a kubectl task
	// whose status says Frozen at 50, its analyze stage Running at the backend, with the
	// finalizer; the account has 10 points. 2. The manager starts: install counts the admission
	// it did not make against 10 points: Overdrawn. 3. Its controller: View Overdrawn → reject
	// → Failed, insufficient_balance, closed; the finalizer stays. 4. The collector deletes it
	// at the TTL: Terminating, for good.
	It("takes the finalizer off (and cancels the work of) a running task it refuses as overdrawn", func() {
		backend := testbackend.New()
		opts := testOptions(backend)
		opts.Task.FinishedTTL = time.Second
		stopFirst := startManager(opts) // credits the account, then is gone
		ns := suite.NewAccount(10)
		stopFirst()
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(50).Create()
		b := aShortTask(ns, tmpl)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()
		// The earlier manager's landed writes: the acceptance with the dispatch, then the finalizer.
		cost := int64(50)
		now := metav1.Now()
		task.Status.Phase, task.Status.Charge, task.Status.Cost, task.Status.StartedAt = videogenv1alpha1.TaskRunning, videogenv1alpha1.ChargeFrozen, &cost, &now
		task.Status.Stages = []videogenv1alpha1.StageStatus{{Name: videogenv1alpha1.StageAnalyze, State: videogenv1alpha1.StageRunning,
			Handle: "earlier-manager-handle", Backend: "test-backend", StartedAt: &now}}
		Expect(k8sClient.Status().Update(ctx, task)).To(Succeed())
		controllerutil.AddFinalizer(task, videogenv1alpha1.FinalizerCancelWork)
		Expect(k8sClient.Update(ctx, task)).To(Succeed())

		startManager(opts)
		Eventually(func(g Gomega) {
			t := taskOf(ns, task.Name)
			g.Expect(t.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
			g.Expect(t.Status.Closed).To(BeTrue())
			g.Expect(t.Status.Error).NotTo(BeNil())
			g.Expect(t.Status.Error.Code).To(Equal("insufficient_balance"), "refused as Overdrawn")
			g.Expect(t.Status.Stages).To(ContainElement(And(
				HaveField("Name", videogenv1alpha1.StageAnalyze), HaveField("State", videogenv1alpha1.StageCanceled))))
		}).Should(Succeed())
		Expect(backend.WasCanceled(generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageAnalyze))).
			To(BeTrue(), "the refused task's running stage is cancelled at the backend")
		// The collector deletes it at its TTL; a task that goes leaves nothing behind.
		Eventually(func() bool {
			t := &videogenv1alpha1.VideoTask{}
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(task), t)
			return err != nil || !t.DeletionTimestamp.IsZero()
		}, 10*time.Second).Should(BeTrue(), "the collector deletes the closed task")
		Consistently(func() []string {
			t := &videogenv1alpha1.VideoTask{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(task), t); err != nil {
				return nil
			}
			return t.Finalizers
		}, 3*time.Second).Should(BeEmpty(), "the refused task is closed with its finalizer on: deleted, it stays Terminating for good")
	})
})

package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// Seen from outside (kubectl against make run): `kubectl patch vt … --subresource=status --type
// merge -p '{"status":{"phase":"Succeeded","charge":"Deducted"}}'` on a running task was taken.
// The task said Succeeded with no result, the account was charged, and its stage ran on at the
// worker until it failed there. Whoever may write task statuses is trusted with the points (the
// ledger charges a task as its status says), but a success needs the result only a backend
// makes, and a task ended by hand has its work stopped as any task that ends.
var _ = Describe("A running task whose status is ended by hand", func() {
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

	running := func() *videogenv1alpha1.VideoTask {
		GinkgoHelper()
		r := directReconciler(k8sClient, l, backend)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		b := aShortTask(ns, tmpl)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))
		}).Should(Succeed())
		return taskOf(ns, task.Name)
	}
	patchStatus := func(task *videogenv1alpha1.VideoTask, status string) error {
		return k8sClient.Status().Patch(ctx, task.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"status":`+status+`}`)))
	}

	It("refuses a success without a result", func() {
		task := running()
		err := patchStatus(task, `{"phase":"Succeeded","charge":"Deducted"}`)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("status.result.url"))
		Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))
		suite.ExpectBalanced(ns, 80, 20, 0)
	})

	// A closed task leaves the manager's cache at once, and its informer's delete carries the
	// copy from before: the ledger would end its hold uncharged whatever the status says, and
	// nobody would stop the stage.
	DescribeTable("refuses an end that also closes it while its stage runs",
		func(status string) {
			task := running()
			err := patchStatus(task, status)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			Expect(err.Error()).To(ContainSubstring("a task is closed only once none of its stages runs"))
			Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))
			suite.ExpectBalanced(ns, 80, 20, 0)
		},
		Entry("a success", `{"phase":"Succeeded","charge":"Deducted","closed":true,"result":{"url":"https://media.example/by-hand.mp4"}}`),
		Entry("a failure", `{"phase":"Failed","charge":"Refunded","closed":true}`),
	)

	// Seen from outside: a success patched with its result while the backend did not answer
	// showed, once the controller got to it, succeeded, charged, and result null. The charge's
	// journal entry carried the result, but is forgotten once the ledger saw the task say
	// Deducted, which a status written by hand says from the start.
	It("keeps the result of a success it charged after the charge's entry was forgotten", func() {
		task := running()
		Expect(patchStatus(task, `{"phase":"Succeeded","charge":"Deducted","result":{"url":"https://media.example/by-hand.mp4"}}`)).To(Succeed())
		Eventually(func(g Gomega) {
			acct := suite.AccountOf(ns)
			g.Expect(acct.Status.Spent).To(Equal(int64(20)))
			g.Expect(acct.Status.Journal).To(BeEmpty())
		}).Should(Succeed())
		r := directReconciler(k8sClient, l, backend)
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Closed).To(BeTrue())
		}).Should(Succeed())
		got := taskOf(ns, task.Name)
		Expect(got.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded))
		Expect(got.Status.Result).To(HaveField("URL", "https://media.example/by-hand.mp4"))
		suite.ExpectBalanced(ns, 80, 0, 20)
	})

	DescribeTable("stops its work at the backend, and settles its points as the status says",
		func(status string, phase videogenv1alpha1.TaskPhase, balance, spent int64) {
			task := running()
			Expect(patchStatus(task, status)).To(Succeed())
			r := directReconciler(k8sClient, l, backend)
			Eventually(func(g Gomega) {
				reconcileOnce(g, r, task)
				got := taskOf(ns, task.Name)
				g.Expect(got.Status.Stages).NotTo(ContainElement(HaveField("State", videogenv1alpha1.StageRunning)))
				g.Expect(got.Finalizers).NotTo(ContainElement(videogenv1alpha1.FinalizerCancelWork))
				// closed (so collected at the TTL), although the status written lacks completedAt
				g.Expect(got.Status.Closed).To(BeTrue())
				g.Expect(got.Status.CompletedAt).NotTo(BeNil())
			}).Should(Succeed())
			Expect(backend.cancelAsked(generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageAnalyze))).
				To(BeTrue(), "the backend was asked to stop the stage that ran")
			got := taskOf(ns, task.Name)
			Expect(got.Status.Phase).To(Equal(phase))
			Expect(got.Status.Stages).To(ContainElement(SatisfyAll(
				HaveField("Name", videogenv1alpha1.StageAnalyze), HaveField("State", videogenv1alpha1.StageCanceled))))
			suite.ExpectBalanced(ns, balance, 0, spent)
			if phase == videogenv1alpha1.TaskFailed {
				Expect(got.Status.Error).To(HaveField("Code", "ended_by_administrator"))
			} else {
				// Charged, so with the result it was written with: its charge's journal entry,
				// which carried it, is forgotten once the ledger saw the status say Deducted.
				Expect(got.Status.Result).To(HaveField("URL", "https://media.example/by-hand.mp4"))
			}
			// It says why it ended, as every end the operator writes does.
			Expect(got.Status.Ending()).NotTo(BeNil())
			Expect(got.Status.Ending().Reason).To(Equal(videogenv1alpha1.ReasonEndedByHand))
		},
		Entry("a success with a result: charged", `{"phase":"Succeeded","charge":"Deducted","result":{"url":"https://media.example/by-hand.mp4"}}`,
			videogenv1alpha1.TaskSucceeded, int64(80), int64(20)),
		Entry("a failure: refunded", `{"phase":"Failed","charge":"Refunded"}`,
			videogenv1alpha1.TaskFailed, int64(100), int64(0)),
	)
})

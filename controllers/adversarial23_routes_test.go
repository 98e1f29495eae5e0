package controllers_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/jobbackend"
	"github.com/videogen-dev/videogen-operator/internal/jobtest"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// Adversarial round 23: the capability→backend routes (--backends-config) change across a
// manager restart while tasks run.
var _ = Describe("Adversarial round 23: the routes change across a restart", func() {
	var (
		l          *ledger.Ledger
		stopLedger func()
		ns         string
	)
	BeforeEach(func() {
		ns = accountWithoutController(100)
		l, stopLedger = startLedger()
		DeferCleanup(stopLedger)
	})

	// Found by the twenty-third adversarial review. A stage's status records the backend that
	// took it (stages[].backend) beside its handle, but the controller never read it back: it
	// observed the handle at whatever backend serves the task's capability now.
	// Interleaving: 1. video.short is routed to the HTTP worker ("test-backend"); a task's
	// analyze stage runs there, its worker handle in the status. 2. The platform team moves
	// video.short to GPU Jobs in the videogen-backends ConfigMap and restarts the manager, as
	// docs/backend-protocol.md says to ("The file is read at start: restart the manager after
	// changing it"); the worker stays configured for the other capabilities. 3. The new manager
	// observes the worker's handle at the Job backend, which refuses it (it is not a Job's
	// namespace/name) as a permanent error.
	// What the user sees: every task of that capability running at the restart fails
	// ("the backend lost the analyze stage (it may have restarted)", which it did not) and is
	// refunded, though the new backend would have run it; and its stage at the worker is never
	// cancelled: it runs on, unpaid, to its deadline (the task's timeout plus a minute, up to
	// days), taking one of the worker's slots from paying tasks. (Routed the other way, Jobs to
	// the worker, the worker answers 404 and the stage is "lost" and submitted again, counting
	// against maxResubmissions, while its Job runs on to its activeDeadlineSeconds.)
	// The fix: a running stage recorded at another backend than the one that serves its
	// capability now is submitted again at the new one (the work key is the same, so the new
	// backend's Submit stays idempotent), and its work at the old one is cancelled when that
	// backend is still configured under its name.
	It("submits a running stage again at its capability's new backend and stops it at the old one", func() {
		worker := testbackend.New()
		before := directReconciler(k8sClient, l, worker) // video.short → "test-backend"
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		b := aShortTask(ns, tmpl).Timeout(time.Hour)
		worker.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))
		}).Should(Succeed())
		analyzeKey := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageAnalyze)
		Expect(worker.Submits(analyzeKey)).To(Equal(1))

		// The restart: video.short now runs as Jobs; the worker still serves video.eraser.
		cfg, err := jobbackend.ParseConfig([]byte(jobtest.Config))
		Expect(err).NotTo(HaveOccurred())
		jobs, err := jobbackend.New(k8sClient, cfg)
		Expect(err).NotTo(HaveOccurred())
		after := directReconciler(k8sClient, l, jobs)
		after.Backends = generation.Routes{
			videogenv1alpha1.CapabilityShort:  generation.Named{Name: "gpu-jobs", Backend: jobs},
			videogenv1alpha1.CapabilityEraser: generation.Named{Name: "test-backend", Backend: worker},
		}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			now := taskOf(ns, task.Name)
			if now.Status.Phase.Terminal() {
				StopTrying(fmt.Sprintf("the task ended %s: %s", now.Status.Phase, now.Status.Error.Message)).Now()
			}
			g.Expect(stageOf(now, videogenv1alpha1.StageAnalyze).Backend).To(Equal("gpu-jobs"))
		}).WithTimeout(10 * time.Second).Should(Succeed())

		now := taskOf(ns, task.Name)
		Expect(now.Status.Phase).To(Equal(videogenv1alpha1.TaskRunning), "the task ended: %+v", now.Status)
		st := stageOf(now, videogenv1alpha1.StageAnalyze)
		Expect(st.State).To(Equal(videogenv1alpha1.StageRunning))
		Expect(st.Handle).To(Equal(ns + "/" + jobbackend.JobName(analyzeKey, videogenv1alpha1.StageAnalyze)))
		Expect(st.Resubmissions).To(BeZero(), "a route change is no loss of the stage")
		Expect(worker.WasCanceled(analyzeKey)).To(BeTrue(), "the stage still runs at the worker, unpaid")
		suite.ExpectBalanced(ns, 80, 20, 0)
	})
})

// stageOf is task's status entry for a stage (a zero one if it has none).
func stageOf(task *videogenv1alpha1.VideoTask, name videogenv1alpha1.StageName) videogenv1alpha1.StageStatus {
	for _, st := range task.Status.Stages {
		if st.Name == name {
			return st
		}
	}
	return videogenv1alpha1.StageStatus{}
}

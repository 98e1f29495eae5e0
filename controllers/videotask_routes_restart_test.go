package controllers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/httpbackend"
	"github.com/videogen-dev/videogen-operator/internal/generation/jobbackend"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/jobtest"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// The capability→backend routes (--backends-config) change across a
// manager restart while tasks run.
var _ = Describe("The routes change across a restart", func() {
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

	// A stage's status records the backend that
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
		// Stopped at the worker, the stage runs under a key of its own from then on (the
		// worker would answer its old key with the stopped stage, were the routes rolled back).
		Expect(st.Reroutes).To(Equal(int32(1)))
		rerouted := generation.ReroutedKey(analyzeKey, 1)
		Expect(st.Handle).To(Equal(ns + "/" + jobbackend.JobName(rerouted, videogenv1alpha1.StageAnalyze)))
		Expect(st.Resubmissions).To(BeZero(), "a route change is no loss of the stage")
		Expect(worker.WasCanceled(analyzeKey)).To(BeTrue(), "the stage still runs at the worker, unpaid")
		suite.ExpectBalanced(ns, 80, 20, 0)
	})

	// A stage's result
	// attributed to another customer's task. The protocol lets a backend leave "key" out of its
	// answers (docs/backend-protocol.md: optional), and asks each backend never to give an id
	// to two stages; it cannot ask two backends not to give the same ids (a third-party server
	// numbering its stages stg-1, stg-2, …). Interleaving: 1. video.short is routed to worker-a;
	// task X's analyze there is stg-1 (succeeded), its render stg-2 (running). 2. worker-b
	// serves video.short elsewhere, or another capability, and has run another account's task Y:
	// its analyze stg-1, its render stg-2, succeeded. 3. video.short is moved to worker-b and the
	// manager restarted. 4. The new manager observes X's render handle stg-2 at worker-b, which
	// answers with Y's render, succeeded, without a key to check. What the user sees: X ends
	// Succeeded with Y's video as its result (another customer's face), charged for it; Y's
	// owner's video leaks. With the fix (the stage is submitted again at worker-b under X's key,
	// never observed there under worker-a's id), X gets its own render.
	It("never takes another backend's stage under the old backend's id for the task's own", func() {
		workerA := newNumberingWorker(map[videogenv1alpha1.StageName]string{videogenv1alpha1.StageRender: "running"})
		DeferCleanup(workerA.Close)
		workerB := newNumberingWorker(nil)
		DeferCleanup(workerB.Close)
		clientA := clientOf(workerA.URL)
		clientB := clientOf(workerB.URL)

		// Y, another account's task, ran both stages at worker-b: stg-1 and stg-2 there.
		runAnotherAccountsTask(clientB)

		before := directReconciler(k8sClient, l, clientA)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "worker-a", Backend: clientA}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Handle).To(Equal("stg-2"))
		}).Should(Succeed())

		after := directReconciler(k8sClient, l, clientB)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "worker-b", Backend: clientB}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Result).NotTo(BeNil(), "%+v", done.Status)
		Expect(done.Status.Result.URL).To(Equal("https://media.example/"+task.Name+".mp4"), "the task was given another task's video")
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded))
		suite.ExpectBalanced(ns, 80, 0, 20)
	})
	// The cancel of a deleted task reaches another
	// account's stage. Interleaving: as above, X's render is stg-2 at worker-a, and worker-b
	// runs another account's render Y as stg-2; worker-b has no cancel-by-key endpoint (404: an
	// older or third-party server, which Cancel allows for by cancelling by id). video.short is
	// moved to worker-b (worker-a no longer configured) and the manager restarted; X is deleted
	// before its next look (its finalizer holds it: the new manager's first reconcile finalizes
	// it). finalize cancels X's unended stages at worker-b with their handles, worker-a's ids:
	// a cancel by key that worker-b does not know, a GET of stg-2 that answers Y's stage without
	// a key, then POST /v1/stages/stg-2/cancel. What the users see: Y, another customer's task,
	// fails ("render failed: canceled") because X was deleted. The fix: a handle is used only at
	// the backend its stage records; at another, the stage is cancelled by its key alone.
	It("does not cancel another account's stage with a handle of the old backend", func() {
		workerA := newNumberingWorker(map[videogenv1alpha1.StageName]string{videogenv1alpha1.StageRender: "running"})
		DeferCleanup(workerA.Close)
		workerB := newNumberingWorker(map[videogenv1alpha1.StageName]string{videogenv1alpha1.StageRender: "running"})
		workerB.noCancelByKey = true
		DeferCleanup(workerB.Close)
		clientA := clientOf(workerA.URL)
		clientB := clientOf(workerB.URL)
		runAnotherAccountsTask(clientB)

		before := directReconciler(k8sClient, l, clientA)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "worker-a", Backend: clientA}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			now := taskOf(ns, task.Name)
			g.Expect(stageOf(now, videogenv1alpha1.StageRender).Handle).To(Equal("stg-2"))
			g.Expect(now.Finalizers).To(ContainElement(videogenv1alpha1.FinalizerCancelWork))
		}).Should(Succeed())

		Expect(k8sClient.Delete(ctx, taskOf(ns, task.Name))).To(Succeed())
		after := directReconciler(k8sClient, l, clientB)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "worker-b", Backend: clientB}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			var gone videogenv1alpha1.VideoTask
			g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(task), &gone))).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(workerB.canceledIDs()).NotTo(ContainElement("stg-2"), "X's deletion cancelled another account's render at worker-b")
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

// numberingWorker is an HTTP backend that numbers its stages stg-1, stg-2, … (afresh in each
// server), leaves "key" out of its answers, as the protocol allows, and renders each task's
// video at https://media.example/<task>.mp4. A stage runs for ever if states says so for its
// stage, and has succeeded otherwise.
type numberingWorker struct {
	*httptest.Server
	mu     sync.Mutex
	ids    map[string]string // key → id
	stages map[string]protocol.StageRequest
	// noCancelByKey: POST /v1/stages/cancel answers 404, as an older server's does.
	noCancelByKey bool
	canceled      []string // ids cancelled by POST /v1/stages/{id}/cancel
	// bare: every stage has succeeded, a render without its result (set with setBare).
	bare bool
	// failed: the stages (by id) that answer failed, with this message (set with fail).
	failed map[string]string
}

// fail makes the stage of id answer failed with msg, as a render that found no face does.
func (w *numberingWorker) fail(id, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failed[id] = msg
}

// forget makes w answer 404 for the stage of id, as a worker restarted without it does.
func (w *numberingWorker) forget(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.stages, id)
}

// setBare makes every stage of w answer succeeded, a render without its result.
func (w *numberingWorker) setBare() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bare = true
}

func (w *numberingWorker) canceledIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.canceled...)
}

func newNumberingWorker(states map[videogenv1alpha1.StageName]string) *numberingWorker {
	w := &numberingWorker{ids: map[string]string{}, stages: map[string]protocol.StageRequest{}, failed: map[string]string{}}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		w.mu.Lock()
		defer w.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		var id string
		switch {
		case req.Method == http.MethodPost && req.URL.Path == protocol.StagesPath:
			var in protocol.StageRequest
			_ = json.NewDecoder(req.Body).Decode(&in)
			if id = w.ids[in.Key]; id == "" {
				id = fmt.Sprintf("stg-%d", len(w.ids)+1)
				w.ids[in.Key], w.stages[id] = id, in
			}
		case req.Method == http.MethodPost && req.URL.Path == protocol.CancelByKeyPath && w.noCancelByKey:
			rw.WriteHeader(http.StatusNotFound)
			return
		case req.Method == http.MethodPost && strings.HasPrefix(req.URL.Path, protocol.StagesPath+"/"):
			if id, ok := strings.CutSuffix(strings.TrimPrefix(req.URL.Path, protocol.StagesPath+"/"), "/cancel"); ok {
				w.canceled = append(w.canceled, id)
			}
			rw.WriteHeader(http.StatusNoContent) // cancels
			return
		case req.Method == http.MethodGet:
			id = strings.TrimPrefix(req.URL.Path, protocol.StagesPath+"/")
		}
		in, ok := w.stages[id]
		if !ok {
			rw.WriteHeader(http.StatusNotFound)
			_, _ = rw.Write([]byte(`{"error":{"code":"not_found","message":"no such stage"}}`))
			return
		}
		st := protocol.StageStatus{ID: id, State: protocol.StateSucceeded, Progress: 100, Outputs: map[string]string{}}
		if s := states[videogenv1alpha1.StageName(in.Stage)]; s != "" && !w.bare {
			st.State, st.Progress = s, 50
		}
		if st.State == protocol.StateSucceeded && in.Stage == string(videogenv1alpha1.StageRender) && !w.bare {
			st.Result = &protocol.Result{URL: "https://media.example/" + in.Task.Name + ".mp4", MediaType: "video/mp4"}
		}
		if msg, ok := w.failed[id]; ok {
			st = protocol.StageStatus{ID: id, State: protocol.StateFailed, Message: msg}
		}
		_ = json.NewEncoder(rw).Encode(st)
	}))
	return w
}

// clientOf is the operator's http backend client for a test server, one attempt a call.
func clientOf(url string) *httpbackend.Client {
	GinkgoHelper()
	c, err := httpbackend.New(httpbackend.Config{BaseURL: url, MaxAttempts: 1})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// runAnotherAccountsTask runs both stages of task-y, another account's, at backend, so that a
// numbering worker's first ids (stg-1 and stg-2) are that task's.
func runAnotherAccountsTask(backend generation.Backend) {
	GinkgoHelper()
	for _, stage := range videogenv1alpha1.Stages {
		y := generation.Work{Key: generation.WorkKey("other-account", "task-y", "y-uid", stage), Namespace: "other-account",
			Task: "task-y", TaskUID: "y-uid", Capability: videogenv1alpha1.CapabilityShort, Stage: stage}
		_, err := backend.Submit(ctx, y)
		Expect(err).NotTo(HaveOccurred())
	}
}

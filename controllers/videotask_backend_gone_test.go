package controllers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/jobbackend"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/jobtest"
)

// Generation backends and the VideoTask stages after a stage's reroutes.
var _ = Describe("Backends and reroutes", func() {
	// A capability taken off every backend.
	// Interleaving: 1. video.short is routed to gpu-a; a task's analyze succeeded there and its
	// render runs there (its handle in the status). 2. The platform team takes video.short off
	// every backend (a ConfigMap edit, the manager restarted), keeping gpu-a for video.eraser:
	// reachable whenever a capability is withdrawn with tasks in flight. 3. The render at gpu-a
	// finishes. 4. The new manager finds no backend for video.short and only waits for the
	// task's timeout, never looking at the render gpu-a still holds under the handle it issued.
	// What the user sees: the task sits Running with "no generation backend serves video.short"
	// until its timeout, then TimedOut and refunded, though its video was done at gpu-a (and
	// the timeout's cancel throws it away). The fix: the no-backend path takes a render that
	// succeeded at the backend it ran at, still configured under its name (finishedAt, as a
	// reroute does), before it waits or times out. Failed before the fix with the task still
	// Running (NoBackend) after every reconcile.
	It("takes a render that finished at its backend when no backend serves the capability any more", func() {
		ns, l := accountWithALedger(100)
		gpuA := newGPU("a")
		gpuA.setRender(generation.Running)
		before := directReconciler(k8sClient, l, gpuA)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-a", Backend: gpuA}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			st := stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender)
			g.Expect(st.State).To(Equal(videogenv1alpha1.StageRunning))
			g.Expect(st.Handle).NotTo(BeEmpty())
		}).Should(Succeed())

		gpuA.setRender(generation.Succeeded) // done while the manager restarts
		after := directReconciler(k8sClient, l, gpuA)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityEraser: generation.Named{Name: "gpu-a", Backend: gpuA}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue(), "%+v", taskOf(ns, task.Name).Status.Conditions)
		}).WithTimeout(5 * time.Second).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%+v", done.Status)
		Expect(done.Status.Result.URL).To(Equal("https://media.example/gpu-a/" + task.Name + ".mp4"))
		suite.ExpectBalanced(ns, 80, 0, 20)
	})

	// Checked, holds (with the fix above): a render that still runs at its old backend while no
	// backend serves the capability is not taken early, and is stopped there at the timeout.
	It("still waits for a render that runs on, and stops it at the timeout", func() {
		ns, l := accountWithALedger(100)
		gpuA := newGPU("a")
		gpuA.setRender(generation.Running)
		before := directReconciler(k8sClient, l, gpuA)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-a", Backend: gpuA}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Handle).NotTo(BeEmpty())
		}).Should(Succeed())

		after := directReconciler(k8sClient, l, gpuA)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityEraser: generation.Named{Name: "gpu-a", Backend: gpuA}}
		reconcileOnce(Default, after, task)
		Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))
		after.Clock = clocktesting.NewFakePassiveClock(timeNow().Add(time.Hour + time.Minute)) // past its timeout
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		renderKey := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageRender)
		Expect(gpuA.canceledKey(renderKey)).To(BeTrue(), "the render runs on at gpu-a, unpaid")
		suite.ExpectBalanced(ns, 100, 0, 0)
	})

	// Deletion stops the render a lost reroute submitted at the new backend; the analyze such a reroute submits
	// there is not. Interleaving: 1. video.short runs at gpu-a; a task's analyze succeeded there
	// and its render runs there (the task guarded by its finalizer). 2. video.short is moved to
	// gpu-b and the manager restarted; gpu-a stays configured. 3. The new manager reroutes the
	// render (cancels it at gpu-a), then analyzedElsewhere runs the analyze again at gpu-b first
	// (same reconcile): gpu-b starts it; the status write recording it meets a conflict: the user
	// deleted the task in that moment. 4. finalize stops what the status records: the render at
	// gpu-a, and at gpu-b the render's rerouted key; the analyze reads Succeeded (at gpu-a), so
	// nothing stops it at gpu-b. What the user sees: nothing (the task is gone, refunded); the
	// service pays for an analyze at gpu-b that runs to its deadline (the task's timeout plus a
	// minute), unpaid, holding a slot. Step 3's lost write is simulated by submitting at gpu-b
	// under the analyze's key directly. The fix: cancelUnended also stops, by key at the current
	// backend, a stage that succeeded at another server than it. Failed before the fix with
	// "the analyze runs on at gpu-b, unpaid".
	It("stops the analyze a lost reroute started at the new backend when the task is deleted", func() {
		ns, l := accountWithALedger(100)
		gpuA := newGPU("a")
		gpuB := newGPU("b")
		gpuA.setRender(generation.Running)
		gpuB.setAnalyze(generation.Running)
		before := directReconciler(k8sClient, l, gpuA)
		before.Backends = shortAndEraser(gpuA, gpuB)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			now := taskOf(ns, task.Name)
			g.Expect(stageOf(now, videogenv1alpha1.StageRender).Handle).NotTo(BeEmpty())
			g.Expect(now.Finalizers).To(ContainElement(videogenv1alpha1.FinalizerCancelWork))
		}).Should(Succeed())

		renderKey := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageRender)
		analyzeKey := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageAnalyze)
		// Step 3: the reroute's cancel at gpu-a and the analyze's Submit at gpu-b land; the
		// status write is lost.
		Expect(gpuA.Cancel(ctx, generation.Work{Key: renderKey, Stage: videogenv1alpha1.StageRender}, "")).To(Succeed())
		_, err := gpuB.Submit(ctx, generation.Work{Key: analyzeKey, Stage: videogenv1alpha1.StageAnalyze,
			Namespace: ns, Task: task.Name, TaskUID: string(task.UID)})
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Delete(ctx, taskOf(ns, task.Name))).To(Succeed())

		after := directReconciler(k8sClient, l, gpuB)
		after.Backends = shortAndEraser(gpuB, gpuA)
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "still there: %v", err)
		}).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(gpuB.canceledKey(analyzeKey)).To(BeTrue(), "the analyze runs on at gpu-b, unpaid")
	})
})

// jobKindBackend is a routeBackend that says the server a Kubernetes Job backend says
// (generation.ServerOf of a real jobbackend.Backend): a Job backend as the stages see it,
// without playing the Job controller.
type jobKindBackend struct {
	*routeBackend
	server string
}

func (b *jobKindBackend) Server() string { return b.server }

// A Job
// backend recorded no server (stages[].server ""), which sameServer takes for "whatever is
// configured under the name now". Interleaving: 1. the backend "gpu" is a job backend serving
// video.short; a task's analyze succeeded in a Job (its outputs the Job image's own, e.g.
// landmarks) and its render runs in a Job (handle namespace/name). 2. The platform team
// replaces "gpu" by an http backend (the reference worker or a model server) under the same
// name, a ConfigMap edit kept small, and restarts the manager. 3. The new manager takes the
// stages for the http server's: it asks it for the Job's handle (404: "the backend lost the
// render stage", one of its two resubmissions spent), then submits the render with the Job
// image's analyze outputs, which the worker refuses ("previous.face_track is required"): the
// task fails "the render stage was refused", refunded, blaming the caller's input; a server
// that does not check renders from outputs it cannot read. The fix: a Job backend says a fixed
// server, "job" (its kind, not its namespace: a namespace change stays a moved handle, its old
// Job deleted, see jobbackend), so a kind change is a change of server: the render is
// rerouted (not lost) and the analyze runs again at the http server first. The old Job is not
// stopped (no Job backend is configured any more to stop it): it runs to its
// activeDeadlineSeconds. Failed before the fix with the task failed "the render stage was
// refused" after a lost-stage resubmission.
var _ = Describe("A Job backend replaced by an http one under the same name", func() {
	It("reroutes its stages to the http server instead of asking it for Job handles", func() {
		ns, l := accountWithALedger(100)
		cfg, err := jobbackend.ParseConfig([]byte(jobtest.Config))
		Expect(err).NotTo(HaveOccurred())
		jobs, err := jobbackend.New(k8sClient, cfg)
		Expect(err).NotTo(HaveOccurred())
		gpu := &jobKindBackend{routeBackend: newRouteBackend("gpu", map[string]string{"landmarks": "[1,2,3]"}, ""), server: generation.ServerOf(jobs)}
		gpu.setRender(generation.Running)
		worker := newRefusingWorker()
		DeferCleanup(worker.Close)
		hb := clientOf(worker.URL)

		before := directReconciler(k8sClient, l, gpu)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu", Backend: gpu}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Handle).NotTo(BeEmpty())
		}).Should(Succeed())

		after := directReconciler(k8sClient, l, hb)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu", Backend: hb}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%+v", done.Status)
		Expect(stageOf(done, videogenv1alpha1.StageRender).Resubmissions).To(BeZero(), "the Job's handle was asked of the http server: lost")
		suite.ExpectBalanced(ns, 80, 0, 20)
	})
})

// newRefusingWorker is a numberingWorker whose render refuses (422) a previous without
// face_track, as the reference worker's does, and whose analyze gives it.
func newRefusingWorker() *httptest.Server {
	inner := newNumberingWorker(nil)
	inner.Close() // only its handler serves, below
	return httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost && req.URL.Path == protocol.StagesPath {
			body, _ := io.ReadAll(req.Body)
			var in protocol.StageRequest
			_ = json.Unmarshal(body, &in)
			if in.Stage == string(videogenv1alpha1.StageRender) && in.Previous["face_track"] == "" {
				rw.Header().Set("Content-Type", "application/json")
				rw.WriteHeader(http.StatusUnprocessableEntity)
				_, _ = rw.Write([]byte(`{"error":{"code":"invalid_request","message":"previous.face_track is required: send the analyze stage's outputs to render"}}`))
				return
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		rec := httptest.NewRecorder()
		inner.Config.Handler.ServeHTTP(rec, req)
		out := rec.Body.Bytes()
		if req.Method == http.MethodGet && rec.Code == http.StatusOK {
			var st protocol.StageStatus
			if json.Unmarshal(out, &st) == nil && st.State == protocol.StateSucceeded && st.Result == nil {
				st.Outputs = map[string]string{"face_track": "t"}
				out, _ = json.Marshal(st)
			}
		}
		for k, v := range rec.Header() {
			rw.Header()[k] = v
		}
		rw.WriteHeader(rec.Code)
		_, _ = rw.Write(out)
	}))
}

// Interleaving: 1. video.short is
// routed to gpu-a; a task's render runs there (its handle in the status, the task guarded by
// its finalizer). 2. video.short is taken off every backend (a ConfigMap edit, the manager
// restarted); gpu-a stays configured for video.eraser. 3. The task now says "no generation
// backend serves video.short; the task waits until its timeout", and its owner deletes it
// (the natural thing to do with a task that says it will only time out). 4. finalize cancels
// the work only through the backend that serves the capability: there is none, so it cancels
// nothing and lets the task go. What the user sees: nothing (the task is gone, its hold ended,
// refunded); the service pays for the render at gpu-a, which runs unstopped to its deadline
// (the task's timeout plus a minute), holding a slot from paying tasks. The fix: with no
// backend serving the capability, a deleted task's stages are stopped where their status says
// they run, when that backend is still configured under its name (as cancelRunningStages does
// at a timeout). Failed before the fix with "the render runs on at gpu-a, unpaid".
var _ = Describe("A task deleted while no backend serves its capability", func() {
	It("stops its render at the backend it runs at", func() {
		ns, l := accountWithALedger(100)
		gpuA := newGPU("a")
		gpuA.setRender(generation.Running)
		before := directReconciler(k8sClient, l, gpuA)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-a", Backend: gpuA}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			now := taskOf(ns, task.Name)
			g.Expect(stageOf(now, videogenv1alpha1.StageRender).Handle).NotTo(BeEmpty())
			g.Expect(now.Finalizers).To(ContainElement(videogenv1alpha1.FinalizerCancelWork))
		}).Should(Succeed())

		after := directReconciler(k8sClient, l, gpuA)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityEraser: generation.Named{Name: "gpu-a", Backend: gpuA}}
		reconcileOnce(Default, after, task)
		Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))
		Expect(k8sClient.Delete(ctx, taskOf(ns, task.Name))).To(Succeed())
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "still there: %v", err)
		}).WithTimeout(10 * time.Second).Should(Succeed())
		renderKey := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageRender)
		Expect(gpuA.canceledKey(renderKey)).To(BeTrue(), "the render runs on at gpu-a, unpaid")
	})
})

// brokenAnswerBackend is a routeBackend whose looks at a render it has started are answered
// with a permanent error that does not say the stage was lost: its answer breaks the protocol
// (as the http client now reports outputs that are not strings, or a 414 on the stage's id).
type brokenAnswerBackend struct{ *routeBackend }

func (b *brokenAnswerBackend) Observe(ctx context.Context, w generation.Work, handle string) (generation.Observation, error) {
	if w.Stage == videogenv1alpha1.StageRender {
		return generation.Observation{}, generation.Refused(errors.New("backend answered GET /v1/stages/… with 414"),
			"the backend's answer does not follow the protocol: the stage id it gave is too long for GET /v1/stages/{id} (414)")
	}
	return b.routeBackend.Observe(ctx, w, handle)
}

// A look at a running stage that
// ends it with a permanent error other than "lost" (the backend's answer breaks the protocol:
// a 414 on the id it gave, a field of the wrong type in a running stage's answer) fails the
// stage and the task (refunded) without stopping the stage, which the backend still runs:
// nothing else stops it (the task ended; its finalizer goes), so it runs unpaid to its
// deadline, the task's timeout plus a minute. The fix: such a stage is cancelled at its
// backend (by its key first, as the http client's Cancel does, then by its id). A lost stage
// is not: its backend no longer knows it. Failed before the fix with "the render runs on,
// unpaid".
var _ = Describe("A stage ended by a broken answer", func() {
	It("is stopped at its backend", func() {
		ns, l := accountWithALedger(100)
		gpu := &brokenAnswerBackend{newRouteBackend("gpu", map[string]string{"face_track": "a"}, "")}
		r := directReconciler(k8sClient, l, gpu)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		Expect(done.Status.Error.Message).To(ContainSubstring("does not follow the protocol"))
		renderKey := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageRender)
		Expect(gpu.canceledKey(renderKey)).To(BeTrue(), "the render runs on, unpaid")
		suite.ExpectBalanced(ns, 100, 0, 0)
	})
})

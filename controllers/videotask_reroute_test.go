package controllers_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// A stage rerouted by a route change across a restart (a
// --backends-config edit, then the manager restarted as docs/backend-protocol.md says to).
var _ = Describe("A stage rerouted across a restart", func() {
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

	// Interleaving:
	// 1. video.short is routed to gpu-a; a task's analyze succeeded there and its render runs
	// there (its handle in the status). 2. video.short is moved to gpu-b and the manager
	// restarted; gpu-a stays configured (for video.eraser). 3. Between the old manager's last
	// look and the new one's first, the render at gpu-a finished (a render takes minutes; a
	// rollout seconds to minutes: reachable whenever the restart catches a render near its end).
	// 4. The new manager reroutes the render: it cancels it at gpu-a (finished: a no-op there)
	// and submits it afresh at gpu-b.
	// What the user sees: the task waits a whole second render (minutes of GPU time at gpu-b,
	// possibly past its timeout: then TimedOut, refunded, though its video was done before the
	// restart), and the video gpu-a finished is thrown away. The handle is gpu-a's own, asked
	// of gpu-a, so its answer is the stage's: the fix looks at the stage where it ran before
	// rerouting a render, and a render that succeeded there is the task's result, charged once.
	It("takes the render that finished at the old backend instead of running it again", func() {
		gpuA := newGPU("a")
		gpuB := newGPU("b")
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
		after := directReconciler(k8sClient, l, gpuB)
		after.Backends = generation.Routes{
			videogenv1alpha1.CapabilityShort:  generation.Named{Name: "gpu-b", Backend: gpuB},
			videogenv1alpha1.CapabilityEraser: generation.Named{Name: "gpu-a", Backend: gpuA},
		}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%+v", done.Status)
		renderKey := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageRender)
		Expect(gpuB.submitsOf(renderKey)+gpuB.submitsOf(generation.ReroutedKey(renderKey, 1))).To(BeZero(),
			"the finished render was thrown away and run again at gpu-b")
		Expect(done.Status.Result.URL).To(Equal("https://media.example/gpu-a/" + task.Name + ".mp4"))
		Expect(stageOf(done, videogenv1alpha1.StageRender).Backend).To(Equal("gpu-a"))
		suite.ExpectBalanced(ns, 80, 0, 20)
	})

	// Checked, holds (with the fix above): a render still running at the old backend is stopped
	// there and submitted at the new one, as videotask_routes_restart_test.go has it; the look at the old backend that
	// the fix adds does not keep it there.
	It("still reroutes a render that runs on at the old backend", func() {
		gpuA := newGPU("a")
		gpuB := newGPU("b")
		gpuA.setRender(generation.Running)
		gpuB.setRender(generation.Running)
		before := directReconciler(k8sClient, l, gpuA)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-a", Backend: gpuA}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Handle).NotTo(BeEmpty())
		}).Should(Succeed())

		after := directReconciler(k8sClient, l, gpuB)
		after.Backends = generation.Routes{
			videogenv1alpha1.CapabilityShort:  generation.Named{Name: "gpu-b", Backend: gpuB},
			videogenv1alpha1.CapabilityEraser: generation.Named{Name: "gpu-a", Backend: gpuA},
		}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Backend).To(Equal("gpu-b"))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		now := taskOf(ns, task.Name)
		Expect(now.Status.Phase).To(Equal(videogenv1alpha1.TaskRunning), "%+v", now.Status)
		renderKey := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageRender)
		Expect(gpuA.canceledKey(renderKey)).To(BeTrue(), "the render still runs at gpu-a, unpaid")
		suite.ExpectBalanced(ns, 80, 20, 0)
	})

	// A render is handed
	// its analyze's outputs (Work.Previous), whose keys and format are the analyzing backend's
	// own (docs/backend-protocol.md: the reference worker's video.short render needs
	// previous.face_track and previous.face_box; a GPU Job image or a third-party server has its
	// own). Interleaving: 1. video.short runs at gpu-a; a task's analyze succeeded there (its
	// outputs in the status), its render runs there. 2. video.short is moved to the reference
	// worker and the manager restarted. 3. The render is rerouted: submitted to the worker with
	// gpu-a's outputs. (Also reached without a running render: the analyze succeeded and the
	// render's Submit failed as an outage before the restart.) What the user sees: the worker
	// answers 422 "previous.face_track is required: send the analyze stage's outputs to render"
	// and the task fails as "the render stage was refused: …", refunded, blaming an input the
	// caller never sent; a backend that does not check previous renders from outputs it cannot
	// read (a wrong video, charged). The fix: a render is only submitted with the outputs of an
	// analyze that ran at the same backend; when the analyze ran elsewhere, it runs again at
	// the render's backend first (same work key, so idempotent there).
	It("runs the analyze again at the render's new backend instead of handing it another backend's outputs", func() {
		gpuA := newRouteBackend("gpu-a", map[string]string{"landmarks": "[1,2,3]"}, "")
		worker := newRouteBackend("reference-worker", map[string]string{"face_track": "t", "face_box": "[0,0,1,1]"}, "face_track")
		gpuA.setRender(generation.Running)
		before := directReconciler(k8sClient, l, gpuA)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-a", Backend: gpuA}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Handle).NotTo(BeEmpty())
		}).Should(Succeed())

		after := directReconciler(k8sClient, l, worker)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "reference-worker", Backend: worker}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%+v", done.Status.Error)
		Expect(done.Status.Result.URL).To(Equal("https://media.example/reference-worker/" + task.Name + ".mp4"))
		Expect(done.Status.Result.Metadata).To(HaveKeyWithValue("face_track", "t"), "rendered from another backend's analyze")
		Expect(stageOf(done, videogenv1alpha1.StageAnalyze).Backend).To(Equal("reference-worker"))
		suite.ExpectBalanced(ns, 80, 0, 20)
	})
})

// Failing first, fixed in bef515f: a stage cancelled
// by a reroute counts it in stages[].reroutes and runs under key-r<N>; failed before with
// "&{Code:render_failed Message:the render stage failed: cancelled}"). A
// route change rolled back: 1. video.short runs at the reference worker ("worker-a"); a task's
// render runs there. 2. video.short is moved to gpu-b and the manager restarted: the render is
// rerouted, cancelled at worker-a by its key, submitted at gpu-b. 3. gpu-b misbehaves
// and the platform team rolls the ConfigMap back and restarts again, within the worker's
// --result-ttl (an hour by default): the render is rerouted back, cancelled at gpu-b, submitted
// at worker-a under the same work key. The worker's POST /v1/stages is idempotent by key (the
// protocol asks it to be): it answers with the stage cancelled in step 2, which reads failed.
// What the user sees: every task that ran across both restarts fails "the render stage failed:
// cancelled" (refunded), though nobody cancelled it and both backends would have run it. The
// fix (not small): a stage submitted again at a backend it was cancelled at must not get that
// stage back: e.g. the status counts a stage's reroutes and the work key carries that count
// after the first (a fresh key at each backend), or rerouteStage records the backends it
// cancelled the stage at and Submit there is told to start anew (a protocol change).
var _ = Describe("A route change rolled back", func() {
	It("runs the render again at the first backend instead of taking the stage cancelled there", func() {
		ns, l := accountWithALedger(100)
		workerA := newRouteBackend("worker-a", map[string]string{"face_track": "a"}, "")
		gpuB := newGPU("b")
		workerA.setRender(generation.Running)
		gpuB.setRender(generation.Running)
		first := directReconciler(k8sClient, l, workerA)
		first.Backends = shortAndEraser(workerA, gpuB)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, first, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Backend).To(Equal("worker-a"))
		}).Should(Succeed())

		moved := directReconciler(k8sClient, l, gpuB)
		moved.Backends = shortAndEraser(gpuB, workerA)
		Eventually(func(g Gomega) {
			reconcileOnce(g, moved, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Backend).To(Equal("gpu-b"))
		}).WithTimeout(10 * time.Second).Should(Succeed())

		workerA.setRender(generation.Succeeded) // it would render now
		rolledBack := directReconciler(k8sClient, l, workerA)
		rolledBack.Backends = shortAndEraser(workerA, gpuB)
		Eventually(func(g Gomega) {
			reconcileOnce(g, rolledBack, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%+v", done.Status.Error)
	})
})

// Checked, holds (with the fix to the spec above): a stage keeps its reroutes, and so
// its key, when its analyze runs again at its new backend (analyzedElsewhere resets both stages
// to Pending). Were they reset, a render moved A→B→A→B would be submitted at B under the key B
// cancelled at the second move, and an analyze stopped at A, finished at B, would run again at
// A under the key A cancelled: either task fails "cancelled", as in the spec above. Each move is
// a ConfigMap edit and a restart, as above.
var _ = Describe("Stages moved back and forth", func() {
	move := func(l *ledger.Ledger, ns string, task *videogenv1alpha1.VideoTask, to, other *routeBackend) {
		r := directReconciler(k8sClient, l, to)
		r.Backends = shortAndEraser(to, other)
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			now := taskOf(ns, task.Name)
			g.Expect(now.Status.Phase.Terminal() || stageOf(now, videogenv1alpha1.StageRender).Backend == to.name).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
	}

	It("runs a render moved twice back to the same backend under a key that backend never cancelled", func() {
		ns, l := accountWithALedger(100)
		a := newGPU("a")
		b := newGPU("b")
		a.setRender(generation.Running)
		b.setRender(generation.Running)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		move(l, ns, task, a, b)
		move(l, ns, task, b, a)
		move(l, ns, task, a, b)
		b.setRender(generation.Succeeded)
		move(l, ns, task, b, a) // the same routes: the render succeeds at b
		Eventually(func(g Gomega) {
			r := directReconciler(k8sClient, l, b)
			r.Backends = shortAndEraser(b, a)
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%+v", done.Status.Error)
		Expect(done.Status.Result.URL).To(Equal("https://media.example/gpu-b/" + task.Name + ".mp4"))
		Expect(stageOf(done, videogenv1alpha1.StageRender).Reroutes).To(Equal(int32(3)))
		suite.ExpectBalanced(ns, 80, 0, 20)
	})

	It("runs an analyze stopped at the first backend under a key of its own when the routes come back", func() {
		ns, l := accountWithALedger(100)
		a := newGPU("a")
		b := newGPU("b")
		a.setAnalyze(generation.Running)
		b.setRender(generation.Running)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		first := directReconciler(k8sClient, l, a)
		first.Backends = shortAndEraser(a, b)
		Eventually(func(g Gomega) {
			reconcileOnce(g, first, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageAnalyze).Handle).NotTo(BeEmpty())
		}).Should(Succeed())
		move(l, ns, task, b, a) // the analyze is stopped at a, succeeds at b; the render runs at b
		a.setAnalyze(generation.Succeeded)
		move(l, ns, task, a, b) // rolled back: the analyze runs again at a, then the render
		Eventually(func(g Gomega) {
			r := directReconciler(k8sClient, l, a)
			r.Backends = shortAndEraser(a, b)
			reconcileOnce(g, r, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%+v", done.Status.Error)
		Expect(done.Status.Result.Metadata).To(HaveKeyWithValue("face_track", "a"))
		Expect(stageOf(done, videogenv1alpha1.StageAnalyze).Reroutes).To(Equal(int32(1)))
		suite.ExpectBalanced(ns, 80, 0, 20)
	})
})

// routeBackend is a generation.Backend named name whose analyze and render are in the states
// setAnalyze and setRender give them (Succeeded by default: an analyze with outputs); a stage cancelled
// reads failed for good, as the reference worker's does. A render that
// succeeds has https://media.example/<name>/<task>.mp4 as its result and its previous as the
// result's metadata. needs, if set, is an analyze output its render requires in previous: a
// render submitted without it is refused (a permanent error), as the reference worker's 422.
type routeBackend struct {
	name    string
	outputs map[string]string
	needs   string

	mu       sync.Mutex
	analyze  generation.State
	render   generation.State
	submits  map[string]int
	canceled map[string]bool
}

// shortAndEraser routes video.short to short and video.eraser to other.
func shortAndEraser(short, other *routeBackend) generation.Routes {
	return generation.Routes{
		videogenv1alpha1.CapabilityShort:  generation.Named{Name: short.name, Backend: short},
		videogenv1alpha1.CapabilityEraser: generation.Named{Name: other.name, Backend: other},
	}
}

// newGPU is the route backend gpu-<letter>, whose analyze outputs face_track <letter>, so that a
// render handed them says which backend analyzed.
func newGPU(letter string) *routeBackend {
	return newRouteBackend("gpu-"+letter, map[string]string{"face_track": letter}, "")
}

func newRouteBackend(name string, outputs map[string]string, needs string) *routeBackend {
	return &routeBackend{name: name, outputs: outputs, needs: needs, analyze: generation.Succeeded, render: generation.Succeeded,
		submits: map[string]int{}, canceled: map[string]bool{}}
}

func (b *routeBackend) setRender(s generation.State) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.render = s
}

func (b *routeBackend) setAnalyze(s generation.State) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.analyze = s
}

func (b *routeBackend) submitsOf(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.submits[key]
}

func (b *routeBackend) canceledKey(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.canceled[key]
}

func (b *routeBackend) Submit(_ context.Context, w generation.Work) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.Stage == videogenv1alpha1.StageRender && b.needs != "" && w.Previous[b.needs] == "" {
		return "", generation.Refused(fmt.Errorf("POST /v1/stages: 422"),
			fmt.Sprintf("previous.%s is required: send the analyze stage's outputs to render", b.needs))
	}
	b.submits[w.Key]++
	return b.name + ":" + w.Key, nil
}

func (b *routeBackend) Observe(_ context.Context, w generation.Work, handle string) (generation.Observation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if handle != b.name+":"+w.Key || b.submits[w.Key] == 0 {
		return generation.Observation{}, generation.Lost(fmt.Errorf("%s: no stage %q", b.name, handle))
	}
	if b.canceled[w.Key] {
		// As the reference worker: a cancelled stage reads failed, and is what a Submit under
		// its key answers with (idempotent by key) until the worker's --result-ttl sweeps it.
		return generation.Observation{State: generation.Failed, Message: "cancelled"}, nil
	}
	if w.Stage == videogenv1alpha1.StageAnalyze {
		if b.analyze != generation.Succeeded {
			return generation.Observation{State: generation.Running, Progress: 50}, nil
		}
		return generation.Observation{State: generation.Succeeded, Progress: 100, Outputs: b.outputs}, nil
	}
	if b.render != generation.Succeeded {
		return generation.Observation{State: generation.Running, Progress: 50}, nil
	}
	return generation.Observation{State: generation.Succeeded, Progress: 100, Result: &videogenv1alpha1.TaskResult{
		URL: "https://media.example/" + b.name + "/" + w.Task + ".mp4", MediaType: "video/mp4", Metadata: w.Previous}}, nil
}

func (b *routeBackend) Cancel(_ context.Context, w generation.Work, _ string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.submits[w.Key] > 0 {
		b.canceled[w.Key] = true
	}
	return nil
}

// Failing first, fixed in bef515f: stages[].server
// records an http backend's url, and a stage whose server differs is rerouted; failed before with
// "the task was given another task's video: https://media.example/task-y.mp4").
// A stage keeps its handle to the backend its status names, by name; a backend whose
// name stays while its server changes is taken for the same one. Interleaving: 1. the backend
// "worker" (http.url http://videogen-worker-a…) serves video.short; task X's render there is
// stg-2, running. 2. The platform team points "worker" at another server (a new deployment in
// another cluster or namespace, a third-party server replacing the reference worker: only the
// url line of the backends ConfigMap changes) and restarts the manager. That server numbers
// its stages stg-1, stg-2, … too, echoes no key (optional in the protocol), and has run another
// account's task Y as stg-1/stg-2, succeeded. 3. The new manager sees stages[].backend
// "worker" = the name that serves video.short, so no reroute: it observes stg-2 at the new
// server and gets Y's render. What the users see: X ends Succeeded with Y's video (another
// customer's face), charged for it. The fix (not small, not made here): a stage must record
// which server issued its handle, not only its name: e.g. generation.Named carries an identity
// of its configuration (the http url, the Job namespace) and the status records it beside the
// name (stages[].backend as "name" plus a new field, or the handle prefixed), a status without
// it being taken for the configured server as now (upgrade); a stage whose recorded identity
// differs is rerouted as a route change across a restart is.
var _ = Describe("A backend's server changes under the same name", func() {
	It("never takes the new server's stage under the old server's id for the task's own", func() {
		ns, l := accountWithALedger(100)
		workerA := newNumberingWorker(map[videogenv1alpha1.StageName]string{videogenv1alpha1.StageRender: "running"})
		DeferCleanup(workerA.Close)
		workerB := newNumberingWorker(nil)
		DeferCleanup(workerB.Close)
		clientA := clientOf(workerA.URL)
		clientB := clientOf(workerB.URL)
		runAnotherAccountsTask(clientB)

		before := directReconciler(k8sClient, l, clientA)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "worker", Backend: clientA}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Handle).To(Equal("stg-2"))
		}).Should(Succeed())

		after := directReconciler(k8sClient, l, clientB)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "worker", Backend: clientB}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Result).NotTo(BeNil(), "%+v", done.Status)
		Expect(done.Status.Result.URL).To(Equal("https://media.example/"+task.Name+".mp4"), "the task was given another task's video")
	})
})

// Interleaving: 1. video.short runs at
// gpu-a; a task's render runs there (its handle in the status, the task guarded by its
// finalizer). 2. video.short is moved to gpu-b and the manager restarted; gpu-a stays
// configured. 3. The new manager reroutes the render: it cancels it at gpu-a and submits it at
// gpu-b, which starts it; the status write recording gpu-b's handle meets a conflict: the user
// deleted the task in that moment (the deletion's own metadata write bumps the
// resourceVersion). 4. finalize cancels the stages its status records: the render, at gpu-a
// (already stopped). What the user sees: nothing, the task is gone and refunded; the service
// pays for the render at gpu-b, which runs unstopped to its deadline (the task's timeout plus
// a minute, up to days), taking a slot from paying tasks. Step 3's lost write is simulated by
// submitting at gpu-b directly under the key the reroute gives (the status read back then is
// the one before the reroute, as after a lost write). The fix: a stage recorded at another
// backend than the one that serves its capability now is also stopped at the current one by
// the key a reroute would have submitted it under (fixed: cancelUnended; failed before with
// "the render runs on at gpu-b, unpaid / Expected <bool>: false to be true").
var _ = Describe("A task deleted as its stage is rerouted", func() {
	It("stops the render the reroute started at the new backend", func() {
		ns, l := accountWithALedger(100)
		gpuA := newGPU("a")
		gpuB := newGPU("b")
		gpuA.setRender(generation.Running)
		gpuB.setRender(generation.Running)
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
		// Step 3: the reroute's cancel at gpu-a and Submit at gpu-b land; its status write is lost.
		Expect(gpuA.Cancel(ctx, generation.Work{Key: renderKey, Stage: videogenv1alpha1.StageRender}, "")).To(Succeed())
		_, err := gpuB.Submit(ctx, generation.Work{Key: generation.ReroutedKey(renderKey, 1), Stage: videogenv1alpha1.StageRender,
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
		Expect(gpuB.canceledKey(generation.ReroutedKey(renderKey, 1))).To(BeTrue(), "the render runs on at gpu-b, unpaid")
	})
})

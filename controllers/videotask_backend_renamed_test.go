package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/httpbackend"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// A stage's status records its backend's name,
// server (the http url) and handle, and its work was stopped by handle only at a backend
// configured under that same name. Interleaving: 1. video.short runs at "gpu-a"
// (http://gpu-a…); a task's render runs there as stg-2. 2. In one ConfigMap change the operator
// renames "gpu-a" to "gpu-east" (same url) and moves video.short to "gpu-b" (or leaves it to
// no backend), and restarts the manager. 3. The new manager reroutes the render to gpu-b (or,
// on deletion, cancels its recorded stages): no backend is named "gpu-a", so nothing asks
// the server, still configured as gpu-east, to stop stg-2. What the user sees: nothing (the
// task runs at gpu-b, or is gone and refunded); the old server runs the render on, unpaid, to
// its deadline: work done twice, a slot taken from paying tasks. The servers here answer 404
// to a cancel by key (an older server's), so the only way to stop the render is by its id.
// The fix: with no backend under the stage's name that talks to its server, one configured
// under another name that talks to the same http server is asked, by the stage's handle.
var _ = Describe("A backend renamed as its capability moves", func() {
	var (
		l          *ledger.Ledger
		stopLedger func()
		ns         string
		oldServer  *numberingWorker
		newServer  *numberingWorker
		renamed    generation.Backend // gpu-a's server, configured as gpu-east after the restart
		newB       generation.Backend // gpu-b
		task       *videogenv1alpha1.VideoTask
		running    map[videogenv1alpha1.StageName]string // the old server's stages that run (read under its lock)
	)
	BeforeEach(func() {
		ns = accountWithoutController(100)
		l, stopLedger = startLedger()
		DeferCleanup(stopLedger)
		running = map[videogenv1alpha1.StageName]string{videogenv1alpha1.StageRender: "running"}
		oldServer, newServer = newNumberingWorker(running), newNumberingWorker(running)
		oldServer.noCancelByKey, newServer.noCancelByKey = true, true
		DeferCleanup(oldServer.Close)
		DeferCleanup(newServer.Close)
		gpuA := clientOf(oldServer.URL)
		// Another client value for the same url, as a restart builds one from the config.
		renamed = clientOf(oldServer.URL)
		newB = clientOf(newServer.URL)

		before := directReconciler(k8sClient, l, gpuA)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-a", Backend: gpuA}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task = aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			now := taskOf(ns, task.Name)
			g.Expect(stageOf(now, videogenv1alpha1.StageRender).Handle).To(Equal("stg-2"))
			g.Expect(now.Finalizers).To(ContainElement(videogenv1alpha1.FinalizerCancelWork))
		}).Should(Succeed())
	})

	// The routes after the restart: gpu-a renamed gpu-east (its url, eraser only), and video.short
	// moved to gpu-b, or served by no backend.
	movedToB := func() generation.Routes {
		return generation.Routes{
			videogenv1alpha1.CapabilityShort:  generation.Named{Name: "gpu-b", Backend: newB},
			videogenv1alpha1.CapabilityEraser: generation.Named{Name: "gpu-east", Backend: renamed},
		}
	}
	noShortBackend := func() generation.Routes {
		return generation.Routes{videogenv1alpha1.CapabilityEraser: generation.Named{Name: "gpu-east", Backend: renamed}}
	}

	deleteWith := func(after generation.Routes) {
		r := directReconciler(k8sClient, l, newB)
		r.Backends = after
		Expect(k8sClient.Delete(ctx, taskOf(ns, task.Name))).To(Succeed())
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "still there: %v", err)
		}).WithTimeout(10 * time.Second).Should(Succeed())
	}

	It("stops the render at its old server when it is rerouted", func() {
		after := directReconciler(k8sClient, l, newB)
		after.Backends = movedToB()
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Backend).To(Equal("gpu-b"))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(oldServer.canceledIDs()).To(ContainElement("stg-2"), "the render runs on at gpu-a's server, unpaid")
		Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Reroutes).To(Equal(int32(1)),
			"stopped there, the render must run under a key of its own")
	})

	It("stops the render at its old server when the task is deleted after the reroute's restart", func() {
		deleteWith(movedToB())
		Expect(oldServer.canceledIDs()).To(ContainElement("stg-2"), "the render runs on at gpu-a's server, unpaid")
		Expect(newServer.canceledIDs()).NotTo(ContainElement("stg-2"), "gpu-a's id was sent to another server")
	})

	It("stops the render at its old server when the task is deleted and no backend serves its capability", func() {
		deleteWith(noShortBackend())
		Expect(oldServer.canceledIDs()).To(ContainElement("stg-2"), "the render runs on at gpu-a's server, unpaid")
	})

	// Checked, holds (regression specs, they passed before any change). The task's
	// other two ends after the same restart: a cancel request (videogen.dev/cancel-requested)
	// and its timeout. With video.short at gpu-b, the render is rerouted first (rerouteStage
	// stops it at its old server) and the task then ends with nothing submitted at gpu-b; with
	// no backend for video.short, cancelRunningStages stops it where stageAt finds it (backendOf,
	// by the url). Either way the old server must be asked to stop stg-2, and no other server
	// given its id.
	DescribeTable("stops the render at its old server when the task ends after the restart",
		func(after func() generation.Routes, timeout bool, reason string) {
			r := directReconciler(k8sClient, l, newB)
			r.Backends = after()
			if timeout {
				r.Clock = clocktesting.NewFakePassiveClock(timeNow().Add(time.Hour + time.Minute)) // past its timeout
			} else {
				requestCancel(task)
			}
			Eventually(func(g Gomega) {
				reconcileOnce(g, r, task)
				g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
			}).WithTimeout(10 * time.Second).Should(Succeed())
			done := taskOf(ns, task.Name)
			Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
			Expect(done.Status.Conditions).To(ContainElement(HaveField("Reason", reason)))
			Expect(oldServer.canceledIDs()).To(ContainElement("stg-2"), "the render runs on at gpu-a's server, unpaid")
			Expect(newServer.canceledIDs()).NotTo(ContainElement("stg-2"), "gpu-a's id was sent to another server")
			suite.ExpectBalanced(ns, 100, 0, 0)
		},
		Entry("cancelled on request, video.short at gpu-b", movedToB, false, videogenv1alpha1.ReasonCanceled),
		Entry("timed out, video.short at gpu-b", movedToB, true, videogenv1alpha1.ReasonTimedOut),
		Entry("cancelled on request, no backend for video.short", noShortBackend, false, videogenv1alpha1.ReasonCanceled),
		Entry("timed out, no backend for video.short", noShortBackend, true, videogenv1alpha1.ReasonTimedOut),
	)

	// A render taken as ended at the server it ran at, found under another
	// name (finishedAt, backendOf by url), was told under the name its status recorded, which no
	// longer names any backend: the task's error read "gpu-a reported success without a
	// result", and on-call found no gpu-a in the config to look at. It names gpu-east now, the
	// backend configured for that server. Failed before the fix with
	// `Expected "gpu-a reported success without a result" to contain substring "gpu-east"`.
	DescribeTable("names the backend it found the render at when the render ends there",
		func(after func() generation.Routes) {
			r := directReconciler(k8sClient, l, newB)
			r.Backends = after()
			oldServer.setBare()
			Eventually(func(g Gomega) {
				reconcileOnce(g, r, task)
				g.Expect(taskOf(ns, task.Name).Status.Phase.Terminal()).To(BeTrue())
			}).WithTimeout(10 * time.Second).Should(Succeed())
			done := taskOf(ns, task.Name)
			Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
			Expect(done.Status.Error.Message).To(ContainSubstring("gpu-east"))
			Expect(stageOf(done, videogenv1alpha1.StageRender).Message).To(Equal("gpu-east reported success without a result"))
		},
		Entry("video.short at gpu-b", movedToB),
		Entry("no backend for video.short", noShortBackend),
	)

	// Checked, holds (a guard on the fix above): renamed only, gpu-east serving video.short
	// itself, the render is not stopped: it is gpu-east's (recorded under that name).
	It("keeps the render of a backend only renamed", func() {
		after := directReconciler(k8sClient, l, renamed)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-east", Backend: renamed}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Backend).To(Equal("gpu-east"))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		st := stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender)
		Expect(oldServer.canceledIDs()).To(BeEmpty(), "the render was stopped and run again at the same server")
		Expect(st.Handle).To(Equal("stg-2"))
		Expect(st.Reroutes).To(BeZero())
	})

	// A stage records the name of its backend, and a backend renamed (same
	// url) was found by its url (backendOf) but never recorded under its name: with video.short
	// at no backend, or at gpu-b, kubectl get -o yaml, videogenctl task show and GET /v1/tasks
	// showed the render at "gpu-a", which no longer exists in the config, while it ran and for
	// good once it succeeded there. Failed before the fix with
	// `Expected <string>: gpu-a to equal <string>: gpu-east`.
	DescribeTable("records the stages under the name their server is configured under now",
		func(after func() generation.Routes, renderEnds bool) {
			r := directReconciler(k8sClient, l, newB)
			r.Backends = after()
			if renderEnds {
				oldServer.mu.Lock()
				delete(running, videogenv1alpha1.StageRender)
				oldServer.mu.Unlock()
			}
			Eventually(func(g Gomega) {
				reconcileOnce(g, r, task)
				now := taskOf(ns, task.Name)
				if renderEnds {
					g.Expect(now.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded))
				}
				g.Expect(stageOf(now, videogenv1alpha1.StageRender).Backend).To(Equal("gpu-east"))
				g.Expect(stageOf(now, videogenv1alpha1.StageAnalyze).Backend).To(Equal("gpu-east"))
			}).WithTimeout(10 * time.Second).Should(Succeed())
			Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Handle).To(Equal("stg-2"))
			Expect(oldServer.canceledIDs()).To(BeEmpty())
		},
		Entry("no backend for video.short, the render running", noShortBackend, false),
		Entry("no backend for video.short, the render succeeded", noShortBackend, true),
		Entry("video.short at gpu-b, the render succeeded", movedToB, true),
	)

	// Only renamed (gpu-east serving video.short), the succeeded analyze,
	// recorded at "gpu-a", was taken for one made at another backend (analyzedElsewhere) and
	// submitted again under its key while the render ran on: a server that had forgotten it
	// (its --result-ttl passed while the render ran) ran the analyze again, work repeated, and
	// the task's progress fell back to the analyze's. Failed before the fix with
	// `Expected <string>: stg-3 to equal <string>: stg-1`.
	It("does not analyze again at a backend only renamed", func() {
		oldServer.mu.Lock()
		for key, id := range oldServer.ids {
			if id == "stg-1" {
				// Forgotten after its TTL; the placeholder keeps the numbering: no id given twice.
				delete(oldServer.ids, key)
				oldServer.ids["forgotten"] = ""
			}
		}
		oldServer.mu.Unlock()
		after := directReconciler(k8sClient, l, renamed)
		after.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-east", Backend: renamed}}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageAnalyze).Backend).To(Equal("gpu-east"))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		now := taskOf(ns, task.Name)
		Expect(stageOf(now, videogenv1alpha1.StageAnalyze).Handle).To(Equal("stg-1"))
		Expect(stageOf(now, videogenv1alpha1.StageAnalyze).State).To(Equal(videogenv1alpha1.StageSucceeded))
		Expect(stageOf(now, videogenv1alpha1.StageRender).Handle).To(Equal("stg-2"))
		Expect(stageOf(now, videogenv1alpha1.StageRender).Backend).To(Equal("gpu-east"))
	})

	// Checked, pinned. The old name still configured at the url of the capability's
	// new backend (two entries of one server, say with two tokens): the render is stopped
	// through its own name and run again under key-r1 at the new entry, not submitted there
	// under its key. That repeats the render, but is right whatever the server does with keys:
	// one that keeps them per token would not find the stage under the new entry's token and
	// would run it twice, the old one unpaid and reachable only with the old name's token (see
	// docs/backend-protocol.md, Routing).
	It("stops the render through its name still configured when the capability moves to another entry of its server", func() {
		sameURL, err := httpbackend.New(httpbackend.Config{BaseURL: oldServer.URL, MaxAttempts: 1, Token: "gpu-east-token-0123456789"})
		Expect(err).NotTo(HaveOccurred())
		after := directReconciler(k8sClient, l, sameURL)
		after.Backends = generation.Routes{
			videogenv1alpha1.CapabilityShort:  generation.Named{Name: "gpu-east", Backend: sameURL},
			videogenv1alpha1.CapabilityEraser: generation.Named{Name: "gpu-a", Backend: renamed},
		}
		Eventually(func(g Gomega) {
			reconcileOnce(g, after, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender).Backend).To(Equal("gpu-east"))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		st := stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageRender)
		Expect(oldServer.canceledIDs()).To(ConsistOf("stg-2"))
		Expect(st.Reroutes).To(Equal(int32(1)))
		Expect(st.Handle).NotTo(Equal("stg-2"))
		oldServer.mu.Lock()
		defer oldServer.mu.Unlock()
		Expect(oldServer.stages[st.Handle].Key).To(HaveSuffix("/render-r1"))
	})

	// With no backend for video.short (withdrawn across a restart), the
	// render's old server, still configured (gpu-east, found by its url), was asked only whether
	// the render succeeded there: one that failed there (the backend's verdict on its input), or
	// that the server no longer knew (it restarted), left the task Running with NoBackend and its
	// points held until its timeout, an hour here, though no backend could run the render again.
	// The task fails at once now, refunded once, and says why. Failed before the fix with
	// `Expected <v1alpha1.TaskPhase>: Running to equal <v1alpha1.TaskPhase>: Failed` (NoBackend).
	DescribeTable("fails the task at once when its render ends at its old server and no backend serves its capability",
		func(end func(), says string) {
			end()
			r := directReconciler(k8sClient, l, newB)
			r.Backends = noShortBackend()
			Eventually(func(g Gomega) {
				reconcileOnce(g, r, task)
				now := taskOf(ns, task.Name)
				g.Expect(now.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed), "conditions: %v", now.Status.Conditions)
			}).WithTimeout(5 * time.Second).Should(Succeed())
			done := taskOf(ns, task.Name)
			Expect(done.Status.Conditions).To(ContainElement(HaveField("Reason", videogenv1alpha1.ReasonStageFailed)))
			Expect(done.Status.Error.Code).To(Equal("render_failed"))
			Expect(done.Status.Error.Message).To(ContainSubstring(says))
			Expect(done.Status.Error.Message).To(ContainSubstring("no generation backend serves video.short"))
			Expect(stageOf(done, videogenv1alpha1.StageRender).State).To(Equal(videogenv1alpha1.StageFailed))
			suite.ExpectBalanced(ns, 100, 0, 0)
			oldServer.mu.Lock()
			defer oldServer.mu.Unlock()
			Expect(oldServer.ids).To(HaveLen(2), "a stage was submitted to a backend that no longer serves video.short")
		},
		Entry("failed there", func() { oldServer.fail("stg-2", "no face found in the template") }, "no face found in the template"),
		Entry("lost there", func() { oldServer.forget("stg-2") }, "lost the render stage"),
	)

	// A render that had failed at gpu-a (its verdict on the input: no face
	// found) when video.short moved to gpu-b was seen only as "not succeeded" there, rerouted and
	// run again at gpu-b: work repeated for the same verdict, and the task's end depended on
	// whether the config changed before the controller's next look. A stage a backend failed
	// ends its task without a reroute (only a lost one is submitted again: resubmitLost), and so
	// it does now with one. Failed before the fix with
	// `Expected <v1alpha1.TaskPhase>: Running to equal <v1alpha1.TaskPhase>: Failed` (running at gpu-b).
	It("fails the task when its render had failed at its old backend, rather than run it again at the new one", func() {
		oldServer.fail("stg-2", "no face found in the template")
		r := directReconciler(k8sClient, l, newB)
		r.Backends = movedToB()
		Eventually(func(g Gomega) {
			reconcileOnce(g, r, task)
			now := taskOf(ns, task.Name)
			g.Expect(now.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed), "render: %+v", stageOf(now, videogenv1alpha1.StageRender))
		}).WithTimeout(5 * time.Second).Should(Succeed())
		done := taskOf(ns, task.Name)
		Expect(done.Status.Error.Code).To(Equal("render_failed"))
		Expect(done.Status.Error.Message).To(Equal("the render stage failed: no face found in the template"))
		st := stageOf(done, videogenv1alpha1.StageRender)
		Expect(st.State).To(Equal(videogenv1alpha1.StageFailed))
		Expect(st.Reroutes).To(BeZero())
		suite.ExpectBalanced(ns, 100, 0, 0)
		newServer.mu.Lock()
		defer newServer.mu.Unlock()
		Expect(newServer.ids).To(BeEmpty(), "the failed render was run again at gpu-b")
	})
})

// With the render's spec above: an analyze that had failed at gpu-a when
// video.short moved to gpu-b was run again there, not taken for the verdict it is. Failed
// before the fix with `Expected <v1alpha1.TaskPhase>: Running to equal <v1alpha1.TaskPhase>:
// Failed` (gpu-b accepted the analyze stage).
var _ = Describe("An analyze that ended at its old backend as its capability moves", func() {
	var (
		l          *ledger.Ledger
		stopLedger func()
		ns         string
		oldServer  *numberingWorker
		newServer  *numberingWorker
		gpuA, newB generation.Backend
		task       *videogenv1alpha1.VideoTask
	)
	BeforeEach(func() {
		ns = accountWithoutController(100)
		l, stopLedger = startLedger()
		DeferCleanup(stopLedger)
		oldServer = newNumberingWorker(map[videogenv1alpha1.StageName]string{videogenv1alpha1.StageAnalyze: "running"})
		newServer = newNumberingWorker(map[videogenv1alpha1.StageName]string{videogenv1alpha1.StageAnalyze: "running"})
		DeferCleanup(oldServer.Close)
		DeferCleanup(newServer.Close)
		gpuA = clientOf(oldServer.URL)
		newB = clientOf(newServer.URL)
		before := directReconciler(k8sClient, l, gpuA)
		before.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "gpu-a", Backend: gpuA}}
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task = aShortTask(ns, tmpl).Timeout(time.Hour).Create()
		Eventually(func(g Gomega) {
			reconcileOnce(g, before, task)
			g.Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageAnalyze).Handle).To(Equal("stg-1"))
		}).Should(Succeed())
	})

	// gpu-a keeps its name and url, for video.eraser only; video.short at gpu-b, or at none.
	routes := func(toB bool) generation.Routes {
		rs := generation.Routes{videogenv1alpha1.CapabilityEraser: generation.Named{Name: "gpu-a", Backend: gpuA}}
		if toB {
			rs[videogenv1alpha1.CapabilityShort] = generation.Named{Name: "gpu-b", Backend: newB}
		}
		return rs
	}

	DescribeTable("fails the task at once, refunded once, instead of running the analyze again or waiting for the timeout",
		func(toB bool, end func(), says string) {
			end()
			r := directReconciler(k8sClient, l, newB)
			r.Backends = routes(toB)
			Eventually(func(g Gomega) {
				reconcileOnce(g, r, task)
				now := taskOf(ns, task.Name)
				g.Expect(now.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed), "analyze: %+v; conditions: %v",
					stageOf(now, videogenv1alpha1.StageAnalyze), now.Status.Conditions)
			}).WithTimeout(5 * time.Second).Should(Succeed())
			done := taskOf(ns, task.Name)
			Expect(done.Status.Error.Code).To(Equal("analyze_failed"))
			Expect(done.Status.Error.Message).To(ContainSubstring(says))
			if !toB {
				Expect(done.Status.Error.Message).To(ContainSubstring("no generation backend serves video.short"))
			}
			Expect(stageOf(done, videogenv1alpha1.StageAnalyze).State).To(Equal(videogenv1alpha1.StageFailed))
			Expect(stageOf(done, videogenv1alpha1.StageAnalyze).Reroutes).To(BeZero())
			suite.ExpectBalanced(ns, 100, 0, 0)
			newServer.mu.Lock()
			defer newServer.mu.Unlock()
			Expect(newServer.ids).To(BeEmpty(), "the failed analyze was run again at gpu-b")
		},
		Entry("failed at gpu-a, video.short at gpu-b", true,
			func() { oldServer.fail("stg-1", "no face found in the face image") }, "the analyze stage failed: no face found in the face image"),
		// As the render's above: with no backend for video.short, an analyze
		// that failed at gpu-a, or that gpu-a lost, left the task Running with NoBackend until its
		// timeout. Failed before the fix with `Expected <v1alpha1.TaskPhase>: Running to equal
		// <v1alpha1.TaskPhase>: Failed` (NoBackend).
		Entry("failed at gpu-a, no backend for video.short", false,
			func() { oldServer.fail("stg-1", "no face found in the face image") }, "no face found in the face image"),
		Entry("lost at gpu-a, no backend for video.short", false,
			func() { oldServer.forget("stg-1") }, "lost the analyze stage"),
	)
})

package controllers_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/httpbackend"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
	"github.com/videogen-dev/videogen-operator/internal/worker/server"
)

// stoppableStages prepares stages for the reference worker's server: analyze succeeds once
// analyzeDone is closed, render runs until its context ends and then closes renderStopped.
type stoppableStages struct{ analyzeDone, renderStopped chan struct{} }

func (p stoppableStages) Prepare(req protocol.StageRequest) (jobs.Func, error) {
	if req.Stage == string(videogenv1alpha1.StageAnalyze) {
		return func(ctx context.Context, _ jobs.Report) (jobs.Outcome, error) {
			select {
			case <-p.analyzeDone:
			case <-ctx.Done():
				return jobs.Outcome{}, ctx.Err()
			}
			return jobs.Outcome{Outputs: map[string]string{"face_box": "[0,0,1,1]"}}, nil
		}, nil
	}
	return func(ctx context.Context, _ jobs.Report) (jobs.Outcome, error) {
		<-ctx.Done()
		close(p.renderStopped)
		return jobs.Outcome{}, ctx.Err()
	}, nil
}

// The HTTP backend's version of videotask_delete_jobs_test.go's first spec: the reference worker
// (its real server and stage table) behind the operator's real client.
var _ = Describe("A deleted task's stage at the HTTP backend", func() {
	It("stops the render stage whose id a deletion kept out of the status, by its key", func() {
		// What broke: finalize cancels every stage not ended, with an empty handle for the
		// render whose id never reached the status, and the HTTP client sent nothing for an
		// empty handle (the protocol named stages by id only). The render ran at the worker,
		// holding a slot, until its deadline: the task's timeout plus a minute.
		//
		// Steps, each a real reconcile against envtest and a real HTTP call, in this order:
		//  1. The task's analyze stage is submitted (handle recorded, FinalizerCancelWork
		//     added), then succeeds. (Held until the finalizer is on: an analyze that
		//     succeeds at the first look has its render submitted in the task's first
		//     reconcile, before the finalizer, and the delete then takes the NotFound path,
		//     which cancels by the ids that reconcile holds.)
		//  2. The next poll sees it and submits the render stage: the worker runs it.
		//  3. Meanwhile the user deletes the task (kubectl delete, or DELETE /v1/tasks/{id}):
		//     the finalizer holds it.
		//  4. The reconcile's status write (render Running, its id) conflicts with the
		//     deletion and is lost.
		//  5. The next reconcile finalizes the task: render is Pending with no handle, so it
		//     is cancelled by its key (POST /v1/stages/cancel); the task goes.
		// Reachable as in the Job spec: a delete (or any write of the task) between the
		// reconcile's read and its status write, or a manager crash there. The user sees
		// nothing; the worker renders for a task that no longer exists.
		stages := stoppableStages{analyzeDone: make(chan struct{}), renderStopped: make(chan struct{})}
		root, stopWorker := context.WithCancel(context.Background())
		table := jobs.New(root, jobs.Config{MaxConcurrent: 2, TTL: time.Hour})
		worker := httptest.NewServer(server.New(stages, table, server.Auth{Token: "tok"}, nil).Handler())
		DeferCleanup(func() { worker.Close(); stopWorker(); table.Wait() })
		c, err := httpbackend.New(httpbackend.Config{BaseURL: worker.URL, Token: "tok", RequestTimeout: 2 * time.Second})
		Expect(err).NotTo(HaveOccurred())

		var (
			once   sync.Once
			render = make(chan string, 1) // the key the render was submitted under
		)
		// Earlier specs' open tasks, whose stages ran at a backend of another name, are sent to
		// this spec's worker since reroutes across a restart: refused, so that they neither take
		// its two slots nor its render hook.
		var mine atomic.Value
		backend := &hookedBackend{Backend: onlyIn{Backend: c, ns: &mine}, after: func(w generation.Work) {
			if w.Stage != videogenv1alpha1.StageRender {
				return
			}
			once.Do(func() {
				defer GinkgoRecover()
				render <- w.Key
				// 3. The user deletes the task while its render stage is being submitted.
				Expect(k8sClient.Delete(ctx, &videogenv1alpha1.VideoTask{
					ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Task}})).To(Succeed())
			})
		}}
		cancels := &cancelLog{Backend: backend, ns: &mine, handles: map[videogenv1alpha1.StageName][]string{}}
		opts := testOptions(nil)
		opts.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "worker", Backend: cancels}}
		stop := startManager(opts)
		DeferCleanup(stop)

		ns := suite.NewAccount(100)
		mine.Store(ns)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(25).Create()
		task := aShortTask(ns, tmpl).Create()

		// 1. The analyze stage runs, recorded: the task holds the finalizer. Then it succeeds.
		Eventually(func(g Gomega) {
			g.Expect(taskOf(ns, task.Name).Finalizers).To(ContainElement(videogenv1alpha1.FinalizerCancelWork))
		}).Should(Succeed())
		close(stages.analyzeDone)

		var key string
		Eventually(render).Should(Receive(&key)) // 2. the render stage was submitted
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{})
		}).Should(Satisfy(apierrors.IsNotFound))
		// 4–5 happened: the render's id never reached the status, so it was cancelled without it
		// (maybe more than once: a finalize retried after its finalizer patch failed cancels again).
		Expect(cancels.of(videogenv1alpha1.StageRender)).To(And(Not(BeEmpty()), HaveEach("")))
		Eventually(stages.renderStopped).Should(BeClosed(), "the render stage of a deleted task is left running at the worker")
		Expect(table.CancelKey(key)).To(BeTrue(), "the worker knows the render's key")
		suite.ExpectBalanced(ns, 100, 0, 0)
	})
})

// cancelLog records the handles the controller cancels each stage of ns's tasks with. Earlier
// specs' tasks are routed to the same backend, and one of them finalized while this spec runs
// cancels its stages here too (by key, an empty handle): they are not this spec's.
type cancelLog struct {
	generation.Backend
	ns      *atomic.Value
	mu      sync.Mutex
	handles map[videogenv1alpha1.StageName][]string
}

func (c *cancelLog) Cancel(ctx context.Context, w generation.Work, handle string) error {
	if ns, _ := c.ns.Load().(string); w.Namespace == ns {
		c.mu.Lock()
		c.handles[w.Stage] = append(c.handles[w.Stage], handle)
		c.mu.Unlock()
	}
	return c.Backend.Cancel(ctx, w, handle)
}

func (c *cancelLog) of(stage videogenv1alpha1.StageName) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.handles[stage]...)
}

// onlyIn refuses, for good, the work of any namespace but the one in ns.
type onlyIn struct {
	generation.Backend
	ns *atomic.Value
}

func (b onlyIn) Submit(ctx context.Context, w generation.Work) (string, error) {
	if ns, _ := b.ns.Load().(string); w.Namespace != ns {
		return "", generation.Permanent(fmt.Errorf("work of namespace %s is not this spec's", w.Namespace))
	}
	return b.Backend.Submit(ctx, w)
}

package controllers

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// hungCancels is a backend whose Cancel hangs until its context ends (a server that accepts
// connections and never answers), recording each call's key and deadline. Submit and Observe
// are never called here.
type hungCancels struct {
	mu        sync.Mutex
	keys      []string
	deadlines []time.Time
}

func (b *hungCancels) Submit(context.Context, generation.Work) (string, error) { return "", nil }
func (b *hungCancels) Observe(context.Context, generation.Work, string) (generation.Observation, error) {
	return generation.Observation{}, nil
}
func (b *hungCancels) Cancel(ctx context.Context, w generation.Work, _ string) error {
	d, _ := ctx.Deadline()
	b.mu.Lock()
	b.keys, b.deadlines = append(b.keys, w.Key), append(b.deadlines, d)
	b.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

// answeringCancels is a backend whose Cancel answers at once.
type answeringCancels struct{ hungCancels }

func (b *answeringCancels) Cancel(context.Context, generation.Work, string) error { return nil }

// Interleaving: a
// task's render has been rerouted N times (each a route change across a restart: a ConfigMap
// edit rolled out and back, as the reroute specs have them), so it runs at gpu-a under K-rN. The
// routes change once more (video.short to gpu-b, gpu-a kept for another capability) while
// gpu-b hangs (a server that accepts connections and never answers: a deadlocked worker, a
// load balancer with no healthy target). rerouteStage stops the render at gpu-a and then, at
// gpu-b, by key, each of the N+1 keys the stage ran under before, each
// cancel for a CancelTimeout of its own: one reconcile of the task waits (N+1) x CancelTimeout
// (5 s each by default) before its Submit (BackendCallTimeout more), holding one of the
// controller's workers, and none of it can be cut short by a cancel request (interruptCall
// cuts only calls made under callContext). Every rerouted task of the capability does so at
// once after the rollout. The fix: the cancels of earlier keys share one CancelTimeout, and
// stop once it is spent. Failed before the fix with the second cancel's deadline one whole
// CancelTimeout after the first's.
func TestRerouteCancelsOfEarlierKeysShareOneCancelTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	oldB, newB := &answeringCancels{}, &hungCancels{}
	r := &VideoTaskReconciler{
		Backends: generation.Routes{
			videogenv1alpha1.CapabilityShort:  generation.Named{Name: "gpu-b", Backend: newB},
			videogenv1alpha1.CapabilityEraser: generation.Named{Name: "gpu-a", Backend: oldB},
		},
		Config: TaskConfig{CancelTimeout: timeout},
	}
	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t", UID: "uid-1"},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityShort}}
	task.Status.Stages = []videogenv1alpha1.StageStatus{{Name: videogenv1alpha1.StageRender, State: videogenv1alpha1.StageRunning,
		Backend: "gpu-a", Handle: "gpu-a:K-r3", Reroutes: 3}}
	st := &task.Status.Stages[0]
	w := r.work(task, catalog.Template{}, videogenv1alpha1.StageRender)

	start := time.Now()
	r.rerouteStage(context.Background(), task, w, st, "gpu-b", newB)
	took := time.Since(start)

	if st.Reroutes != 4 || st.Handle != "" {
		t.Fatalf("the stage is not readied for gpu-b: reroutes %d, handle %q", st.Reroutes, st.Handle)
	}
	newB.mu.Lock()
	defer newB.mu.Unlock()
	if len(newB.keys) == 0 {
		t.Fatalf("no earlier key was stopped at gpu-b")
	}
	for i, d := range newB.deadlines {
		if d.After(start.Add(timeout + timeout/2)) {
			t.Errorf("cancel %d of %d at gpu-b (%s) has its own CancelTimeout: deadline %v after the reroute began (one reconcile spends %v on them)",
				i+1, len(newB.keys), newB.keys[i], d.Sub(start), took)
		}
	}
}

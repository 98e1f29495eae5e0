package ledger

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Interleavings found by the second adversarial review of the ledger (after 2cd964f and
// f5a77b6): each test forces one, step by step, and checks the invariants docs/ledger.md claims.

// A REST create counts its hold in a pending entry with no UID, and unlocks the books for the
// create. A copy of an earlier task of that name that comes after the task left the books (the
// controller's Observe of a status it wrote before the task was deleted, delivered after the
// informer's delete event) finds that entry and takes it over:
//
//   - a REST task's copy carrying the same signed admission (a retry of the same REST request:
//     same Idempotency-Key, so the same name and spec, and the same price, sign the very same
//     annotation) is taken for the create's task (createsTask): the entry takes the deleted
//     task's UID and moves pending -> held;
//   - a kubectl task's copy showing Frozen is another task of the name: the entry drops the
//     create's hold and then counts the deleted task's Frozen cost, as an admission the books
//     did not make (held if the balance covers it).
//
// Either way, when the create then fails (refused: a quota, a namespace being deleted; or a
// timeout whose look finds nothing), CreateTask leaves the entry alone (not pending any more, or
// no longer carrying the create's admission, and with a UID): a hold for a task that does not
// exist, kept until the books are rebuilt or another task of the name appears. Frozen never
// returns to 0, the balance stays short, and a deleted account cannot go.
//
// Interleaving: task r held; the controller writes r's status (Running) but has not yet called
// Observe; r is deleted and its delete event is delivered; a REST CreateTask of r counts its
// pending hold; the controller's Observe(r's Running copy) runs; the create is refused (403).
func TestAStaleCopyOfADeletedTaskDoesNotTakeOverAPendingCreate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		kubectl bool // r was made with kubectl (held by its Frozen status), not by a REST create
	}{
		{name: "a retry of the REST request that made the deleted task"},
		{name: "a REST create of the name of a deleted kubectl task", kubectl: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 100)
			var running *videogenv1alpha1.VideoTask
			var l *Ledger
			s := h.stepped("ledger-2", func(cfg *Config) {
				inner := cfg.Client
				cfg.Client = interceptor.NewClient(withWatch{inner}, interceptor.Funcs{
					Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
						if running != nil {
							// The controller's Observe of the copy it wrote before r was deleted.
							l.Observe(running)
							return apierrors.NewForbidden(schema.GroupResource{Group: videogenv1alpha1.GroupVersion.Group, Resource: "videotasks"},
								obj.GetName(), errors.New("exceeded quota: count/videotasks.videogen.dev"))
						}
						return c.Create(ctx, obj, opts...)
					},
				})
			})
			l = s.l
			var r *videogenv1alpha1.VideoTask
			if tc.kubectl {
				r = h.task("r")
				r.Spec.Inputs.SourceVideoURL = "https://media.example/made-with-kubectl.mp4"
				must(t, k8s.Create(h.ctx, r))
				h.feed(l, r)
				must(t, l.Admit(r, 10))
				cost := int64(10)
				r = h.writeStatus(l, r, func(st *videogenv1alpha1.VideoTaskStatus) {
					st.Phase, st.Charge, st.Cost = videogenv1alpha1.TaskQueued, videogenv1alpha1.ChargeFrozen, &cost
				})
			} else {
				r = h.create(l, "r", 10)
			}
			h.books(s.settle(), 100, 0, 10)

			// The controller writes r's status; its Observe is delayed.
			next := r.DeepCopy()
			next.Status.Phase = videogenv1alpha1.TaskRunning
			must(t, k8s.Status().Update(h.ctx, next))
			must(t, k8s.Delete(h.ctx, next))
			h.feedDelete(l, next) // r's hold ends
			if f := h.figures(l); f.Frozen != 0 || f.Holds != 0 {
				t.Fatalf("figures after r's deletion: %+v, want nothing frozen", f)
			}

			running = next
			if _, err := l.CreateTask(h.ctx, h.task("r"), 10); !apierrors.IsForbidden(errors.Unwrap(err)) {
				t.Fatalf("the REST create: %v, want it refused (403)", err)
			}
			if f := h.figures(l); f.Frozen != 0 || f.Holds != 0 || f.Balance != 100 {
				t.Errorf("figures after the refused create: %+v; want frozen 0, holds 0, balance 100: no task of the name exists", f)
			}
			h.books(s.settle(), 100, 0, 0)
		})
	}
}

package ledger

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Found by the seventh adversarial review of the ledger (after d590212): the REST admission
// path with several replicas and a failover.

// Start builds the books from one list of the open tasks (openTasks, at listRV), then lists the
// top-ups, installs the books of every account, and only then registers its event handlers on
// the manager's VideoTask informer (watch). A handler registered on an informer is told of the
// objects the informer holds at that moment (as Adds) and of what happens after; it is never
// told of a deletion the informer processed before it was registered, nor of one that happened
// before the informer's own first list. So a task that leaves the open tasks between the
// ledger's list and the registration (a tenant's `kubectl delete videotask`, the controller's
// finalizer removal of a deleted task, an earlier manager's late write closing it: the cache
// selects open tasks only, so a close is a delete for it) stays in the books for good: no event
// will ever drop it, no controller reconciles a task that is gone, and nothing else looks.
//
// What a user sees: frozen never goes back to 0 (until the next failover rebuilds the books),
// the balance stays short of the task's price, a REST create the customer can pay for is
// refused 402, and a deleted account cannot go (its holds are never 0).
//
// Interleaving (a failover): task t (REST, 60 of 100) is open; the new manager is elected, its
// ledger fences the account and lists the open tasks (t, held); t is deleted (kubectl, by the
// tenant: the task has no finalizer before its first stage is dispatched); the manager's
// informer processes the deletion (it already ran: the case "informer running") or makes its
// first list after it (the informer started by watch's GetInformer, or by the controllers that
// start with the ledger at the election: "informer started late"); watch registers the
// handlers. Reachable: a deletion is a tenant's right at any time; the window is the top-ups
// list, the install of every account's books and the informer's start, every failover.
func TestADeletionBetweenTheBuildListAndTheWatchEndsTheHold(t *testing.T) {
	for _, tc := range []struct {
		name    string
		running bool // the informer already runs and is synced when Start begins
	}{
		{name: "informer running", running: true},
		{name: "informer started late"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 100)
			task := h.create(h.l, "t", 60)
			h.books(h.settle(h.l), 100, 0, 60)

			ctx, cancel := context.WithCancel(h.ctx)
			defer cancel()
			informers, err := cache.New(restConfig, cache.Options{Scheme: k8s.Scheme(), ByObject: map[client.Object]cache.ByObject{
				&videogenv1alpha1.VideoTask{}: {Field: fields.OneTermNotEqualSelector(videogenv1alpha1.FieldStatusClosed, "true")},
			}})
			must(t, err)
			go func() { _ = informers.Start(ctx) }()
			if tc.running {
				_, err := informers.GetInformer(ctx, &videogenv1alpha1.VideoTask{})
				must(t, err)
			}

			var deleted atomic.Bool
			reader := interceptor.NewClient(k8s, interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if err := c.List(ctx, list, opts...); err != nil {
						return err
					}
					if _, ok := list.(*videogenv1alpha1.VideoTaskList); ok && deleted.CompareAndSwap(false, true) {
						// The build's list of the open tasks has t. The tenant deletes it now.
						must(t, k8s.Delete(ctx, task))
						if tc.running {
							// The informer processes the deletion before the handlers are registered.
							waitFor(t, func() bool {
								return isNotFound(informers.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{}))
							})
						}
					}
					return nil
				},
			})
			signer, err := NewSigner(testKey)
			must(t, err)
			l := New(Config{Client: h.faults.client(), Reader: reader, Cache: informers, Signer: signer, Identity: "ledger-7",
				WriteInterval: 20 * time.Millisecond})
			go func() { _ = l.Start(ctx) }()
			waitFor(t, l.Ready)
			if !deleted.Load() {
				t.Fatal("the build never listed the open tasks")
			}

			// Every event the informer will deliver about t has had time to come.
			deadline := time.Now().Add(2 * time.Second)
			for h.figures(l).Frozen != 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if f := h.figures(l); f.Frozen != 0 || f.Holds != 0 || f.Balance != 100 {
				t.Errorf("figures %+v after t was deleted: want frozen 0, holds 0, balance 100 (no task exists)", f)
			}
			if _, err := l.CreateTask(h.ctx, h.task("u"), 80); err != nil {
				var short *InsufficientBalanceError
				if errors.As(err, &short) {
					t.Errorf("a REST create of 80 with 100 credited, nothing spent and no task: 402 (%v)", err)
				} else {
					t.Errorf("a REST create of 80: %v", err)
				}
			}
		})
	}
}

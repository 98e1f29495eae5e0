package ledger

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// sweepUnevented (sweep_unevented_internal_test.go) reads again only the entries
// counted from a REST create's answer or from a read (awaitEvent); an entry counted from the
// LIST a manager builds its books from (Start after a failover, or build) is never marked, so
// a task in that list that no informer event ever names holds its price for ever, exactly the
// hold sweepUnevented was written to end for a create's answer.
//
// Interleaving (two managers, HA kube-apiservers): 1. manager-1 admits and creates "a" at 60
// through the REST API (its books hold it). 2. A kube-apiserver restarts: manager-1 loses its
// Lease (it cannot renew: the usual cause of a failover), and manager-2's VideoTask watch
// breaks at the same time (its informer has not seen "a": "a" was created after its watch
// last delivered; its store is synced already, so the ledger's handlers run at once).
// 3. manager-2 is elected; Start fences the account and LISTS the open tasks from the
// kube-apiserver: "a" is in the list, counted held 60 (its signed admission). 4. The tenant
// deletes "a" (no stage ran, no finalizer keeps it). 5. manager-2's reflector reconnects with
// 410 and relists: "a" is in neither its old store nor the new list, so no Add and no Delete
// reach the books. Nothing reads "a" again: its entry was never marked for sweepUnevented.
// What the customer sees: GET /v1/balance frozen 60, balance 40, for ever (until the next
// failover), with no task holding it; an account being closed never becomes closable.
//
// Want: an entry counted from the list that no event names is read again like any other
// (install marks each task it counts from the list as awaiting its event; the informer's
// Add, which comes at once for every task its store holds, clears the mark). Failed before
// the fix (42cacc3): manager-2's books still held {Balance:40 Frozen:60 Holds:1} after 11
// minutes of the ledger's clock.
func TestTaskListedAtFailoverAndDeletedWhileTheInformerRelistedDoesNotHoldForEver(t *testing.T) {
	h := newHarness(t, 100)
	// 1. manager-1 creates "a" (REST): held 60.
	a := h.create(h.l, "a", 60)
	h.settle(h.l)
	// 3. manager-2 builds its books from the lists (fence, then the open tasks): "a" held.
	clk := clocktesting.NewFakeClock(time.Now())
	l2 := h.startWith(h.ctx, "ledger-2", func(c *Config) { c.Clock = clk })
	if f := h.figures(l2); f.Frozen != 60 || f.Holds != 1 {
		t.Fatalf("manager-2's books after the list: %+v, want frozen 60 in one hold", f)
	}
	// 4. Deleted by the tenant; 5. the relist delivers nothing of it (no event is fed).
	must(t, k8s.Delete(h.ctx, a))
	if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(a), a); !isNotFound(err) {
		t.Fatalf("task a still exists after its delete: %v", err)
	}
	// Ten minutes of the ledger's clock, a minute at a time.
	steps := 0
	err := wait.PollUntilContextTimeout(h.ctx, 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		if h.figures(l2).Holds == 0 {
			return true, nil
		}
		if steps++; steps > 10 {
			return true, nil
		}
		clk.Step(time.Minute)
		return false, nil
	})
	if f := h.figures(l2); err != nil || f.Holds != 0 || f.Frozen != 0 || f.Balance != 100 {
		t.Fatalf("task a is gone (deleted while manager-2's informer relisted: no event), yet manager-2's books "+
			"still hold it after %d minutes: %+v; want frozen 0, no hold, balance 100 once a read finds it gone", steps, f)
	}
}

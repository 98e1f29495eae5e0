package ledger

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Adversarial round 9: the VideoTask controller's use of the ledger (View, Admit, Charge,
// Observe, endCharged) under stale caches, conflicts and crashes.

// What breaks: a task made with kubectl whose backend answers at once is charged before any
// status write records its hold (accept → advance: both stages Succeeded in the first
// reconcile → finish → Charge; the status is put back to `before`, nothing written; the
// controller keeps the terminal status in its in-memory `ends` map). If the manager crashes (or
// loses its Lease) after the charge lands and before endCharged writes Succeeded/Deducted, the
// new manager finds the task charged (the journal has it) but with an empty status: no
// `charge: Frozen`, no `cost`, and no signed admission (kubectl). The books' entry gets its
// price from the copy (`e.price = max(e.price, ev.price)` = 0), not from the journal entry's
// Amount, so View says Charged with Price 0, and endCharged writes `cost: 0` (CEL lets a first
// cost be anything) and the event "deducted 0 points".
//
// Interleaving, step by step:
//  1. A tenant creates VideoTask k with kubectl (no admission annotation); the informer
//     delivers it (unadmitted).
//  2. Manager A's controller: View → Unadmitted → accept → Admit(k, 10) (pending) → advance:
//     the backend's Submit and Observe answer Succeeded for both stages at once (a fast or
//     cached backend; the code says so: "a fast backend may be done already") → finish →
//     Charge (charging, queued); the status goes back to `before`: nothing is written.
//  3. A's ledger writes the account: spent 10, journal entry {k, Amount 10, Result}.
//  4. A crashes (OOM, node loss) or loses its Lease before the controller's requeue runs
//     endCharged (the window is the requeue plus the releaseWork patch plus the status write).
//  5. Manager B is elected: fence, then lists the open tasks: k, with an empty status. install
//     → observe: in the journal → charged, price max(0, 0) = 0.
//  6. B's controller: View → Charged, Price 0, Result from the journal → endCharged (no `ends`
//     entry in this process) → writes Succeeded, Deducted, cost 0.
//
// Why each step is reachable: 1 is any tenant's kubectl; 2 is the documented fast path of
// advance (the test backend and any backend with a cached result answer at once); 3 is the
// ledger's ordinary write; 4 is a crash or failover, which the argument claims to survive
// ("the entry carries the result, so a new manager finishes the task from it"); 5 and 6 are
// the new manager's ordinary rebuild and reconcile.
//
// What a user sees: `kubectl get videotask k` says Succeeded, Deducted, cost 0, and its Settle
// event "deducted 0 points", while the account's spent went up by 10: spent ≠ the sum of the
// succeeded tasks' costs, and the customer's invoice built from task costs misses 10 points.
func TestAChargeFinishedByANewManagerCarriesItsPriceIntoTheTasksCost(t *testing.T) {
	h := newHarness(t, 100)
	ctxA, crashA := context.WithCancel(h.ctx)
	a := h.start(ctxA, "manager-a")
	task := h.task("k")
	must(t, k8s.Create(h.ctx, task))
	h.feed(a, task)
	must(t, a.Admit(task, 10))
	h.charge(a, task) // queued by finish, then landed: A's Charge answers true
	h.books(h.settle(a), 100, 10, 0)
	crashA() // before endCharged writes Succeeded, Deducted

	b := h.start(h.ctx, "manager-b")
	fresh := &videogenv1alpha1.VideoTask{}
	must(t, k8s.Get(h.ctx, client.ObjectKeyFromObject(task), fresh))
	v, err := b.View(fresh)
	must(t, err)
	if v.Standing != Charged || v.Result == nil {
		t.Fatalf("view %+v: want Charged with the journal's result", v)
	}
	// B's controller: endCharged, as written in controllers/videotask_finish.go.
	done := h.writeStatus(b, fresh, func(st *videogenv1alpha1.VideoTaskStatus) {
		now := metav1.Now()
		price := v.Price
		st.Phase, st.Charge, st.Result, st.Progress, st.CompletedAt = videogenv1alpha1.TaskSucceeded, videogenv1alpha1.ChargeDeducted, v.Result, 100, &now
		st.Cost = &price
		st.Closed = true
	})
	h.feed(b, done)
	acct := h.settle(b)
	h.booksClosed(acct, 100, 10, 0)
	if done.Status.Cost == nil || *done.Status.Cost != acct.Status.Spent {
		t.Fatalf("the task ends Succeeded, Deducted with cost %d (View's price %d) while the account spent %d for it: "+
			"the new manager priced the charged task from its empty status, not from its journal entry", *done.Status.Cost, v.Price, acct.Status.Spent)
	}
}

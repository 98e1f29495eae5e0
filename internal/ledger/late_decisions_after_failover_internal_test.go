package ledger

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// An earlier manager's late decisions seen by the controller before the ledger (rebuild and failover).
//
// The controller's copy of a task and the ledger's events come from one informer, but through
// two listeners, each with its own goroutine and queue: the controller may reconcile a copy
// the ledger's handler has not delivered yet (the handler may wait for the account's lock,
// held by a rebuild's lists or a create's bookkeeping). For this process's own writes that is
// harmless (writeStatus hands its copy to Observe as it lands). A status written by somebody
// else is the case: the deposed manager's late reject or refund, a compare-and-swap sent
// before it lost its Lease, that lands after the new manager listed the task open.
//
// View answered such a copy from the older entry: Unadmitted (a kubectl task the new manager
// listed before the reject) or Held (a REST task). The controller then accepts the task, which
// has ended:
//
//   - Unadmitted: accept calls Admit with the ended copy. Admit counts the hold and moves the
//     entry's resourceVersion to the copy's, so the ledger's own event for that very copy,
//     when it comes, is "not newer" and ignored. The controller's write (Queued, Frozen over
//     Failed) is refused by the status rules (a finished task's phase never changes): not a
//     conflict, so no Unadmit. The hold stays, and View keeps saying Held: every reconcile
//     accepts again (dispatching the first stage at the backend, the write refused again), so
//     the task never reaches reconcileFinished and is never closed. Points frozen for good,
//     until the tenant deletes a task that says Failed.
//   - Held: accept dispatches the first stage of a task that ended (work at the backend that
//     no status records and nobody pays for), its write refused, until the ledger's event.
//
// The interleaving (A the deposed manager, B the new one):
//  1. A reconciles kubectl task t (or REST task r), decides to reject (refund) it, and sends
//     the status write; it is slow to land (A paused, or a congested connection).
//  2. A loses its Lease; B is elected, fences the account, lists the open tasks: t is open,
//     unadmitted (r held, signed).
//  3. A's write lands: t Failed (r Failed, Refunded), not closed yet (its completion webhook is
//     due). B's informer has the copy; B's controller reconciles it before B's ledger handler.
//  4. B's controller: View → Unadmitted → Admit(t, 10) → the status write is refused (Invalid).
//  5. B's ledger handler delivers the Failed copy.
//
// What a user sees: GET /v1/balance shows 10 points frozen by a task that says Failed; the task
// never closes, and its points never come back unless the task is deleted.
func TestAnEarlierManagersLateRejectSeenFirstByTheControllerFreezesNothing(t *testing.T) {
	h := newHarness(t, 100)
	// 2. B's books list t open, unadmitted.
	task := h.task("t")
	must(t, k8s.Create(h.ctx, task))
	h.feed(h.l, task)
	h.settle(h.l)

	// 3. A's late reject lands: Failed, nothing charged, not closed yet.
	failed := task.DeepCopy()
	ended("", videogenv1alpha1.TaskFailed, false)(&failed.Status)
	failed.Status.Cost = nil
	failed.Status.Error = &videogenv1alpha1.TaskError{Code: "insufficient_balance", Message: "refused by the deposed manager"}
	must(t, k8s.Status().Update(h.ctx, failed))

	// 4. B's controller reconciles the Failed copy before B's ledger handler delivers it.
	v, err := h.l.View(failed)
	must(t, err)
	if v.Standing == Unadmitted {
		if err := admit(h.l, failed, 10); err == nil {
			// accept writes the hold (Queued, Frozen): the status rules refuse it.
			accepted := failed.DeepCopy()
			price := int64(10)
			accepted.Status.Phase, accepted.Status.Charge, accepted.Status.Cost = videogenv1alpha1.TaskQueued, videogenv1alpha1.ChargeFrozen, &price
			accepted.Status.CompletedAt, accepted.Status.Error = nil, nil
			if err := k8s.Status().Update(h.ctx, accepted); !apierrors.IsInvalid(err) {
				t.Fatalf("accepting a Failed task: %v, want Invalid", err)
			}
		}
	}
	// 5. B's ledger handler delivers the Failed copy.
	h.feed(h.l, failed)

	if f := h.figures(h.l); f.Frozen != 0 || f.Holds != 0 || f.Balance != 100 {
		t.Fatalf("figures %+v after the Failed task's own event: want nothing frozen, balance 100 (the controller saw %v first)", f, v.Standing)
	}
	if v, err := h.l.View(failed); err != nil || v.Standing != Settled {
		t.Fatalf("View(the Failed task) = %+v, %v: want Settled (the controller closes it)", v, err)
	}
	h.books(h.settle(h.l), 100, 0, 0)
}

// The REST variant: a held task refunded by the deposed manager's late write. View said Held,
// and the controller, seeing a charge that is not Frozen, accepts the task (created by the
// ledger: record its hold), dispatching its first stage at the backend, for a task that ended.
// The answer it needs is that the books have not caught up with that copy (Unknown: ask again
// shortly); the ledger's event then settles it.
func TestAnEarlierManagersLateRefundSeenFirstByTheControllerIsNotHeld(t *testing.T) {
	h := newHarness(t, 100)
	task := h.create(h.l, "r", 10)
	h.feed(h.l, task)
	h.books(h.settle(h.l), 100, 0, 10)

	refunded := task.DeepCopy()
	ended(videogenv1alpha1.ChargeRefunded, videogenv1alpha1.TaskFailed, false)(&refunded.Status)
	must(t, k8s.Status().Update(h.ctx, refunded))

	v, err := h.l.View(refunded)
	must(t, err)
	if v.Standing == Held || v.Standing == Unadmitted {
		t.Fatalf("View(a copy that ended after what the books know) = %v: the controller would accept (dispatch) a Failed task", v.Standing)
	}
	h.feed(h.l, refunded)
	if v, err := h.l.View(refunded); err != nil || v.Standing != Settled {
		t.Fatalf("View after the ledger's event = %+v, %v: want Settled", v, err)
	}
	h.books(h.settle(h.l), 100, 0, 0)
}

// The same window with the deposed manager's late accept instead of its reject: A admitted
// kubectl task t at 10 and wrote its hold (Queued, Frozen, cost 10); the write lands after B
// listed t unadmitted, and after an administrator raised the template's price to 12. B's
// controller reconciles the Frozen copy before B's ledger handler delivers it: View says
// Unadmitted, accept quotes 12 and Admit counts 12, moving the entry's resourceVersion to the
// copy's (so the ledger's own event for that copy, which would hold t at the 10 its status
// says, is ignored). B's write of cost 12 is refused by the status rules (cost never changes):
// not a conflict, so no Unadmit. The books hold t at 12; the controller runs it (its status says
// Frozen), charges 12, and then every write of its end (cost 12 over 10) is refused: t never
// ends Succeeded, never closes, and the customer was charged 12 for a task that says it costs 10.
//
// Interleaving: as above, steps 1-3 with A's accept; B's controller: View → Unadmitted →
// Admit(t, 12) → write refused (Invalid); B's ledger handler delivers the copy.
func TestAnEarlierManagersLateAcceptSeenFirstByTheControllerHoldsItsOwnPrice(t *testing.T) {
	h := newHarness(t, 100)
	task := h.task("t")
	must(t, k8s.Create(h.ctx, task))
	h.feed(h.l, task)
	h.settle(h.l)

	// A's late accept lands: Queued, Frozen, cost 10.
	frozen := task.DeepCopy()
	cost := int64(10)
	frozen.Status.Phase, frozen.Status.Charge, frozen.Status.Cost = videogenv1alpha1.TaskQueued, videogenv1alpha1.ChargeFrozen, &cost
	must(t, k8s.Status().Update(h.ctx, frozen))

	// B's controller reconciles it first, at the new price.
	v, err := h.l.View(frozen)
	must(t, err)
	if v.Standing == Unadmitted {
		if err := admit(h.l, frozen, 12); err == nil {
			accepted := frozen.DeepCopy()
			price := int64(12)
			accepted.Status.Cost = &price
			if err := k8s.Status().Update(h.ctx, accepted); !apierrors.IsInvalid(err) {
				t.Fatalf("writing cost 12 over 10: %v, want Invalid", err)
			}
		}
	}
	h.feed(h.l, frozen) // B's ledger handler delivers the copy

	if f := h.figures(h.l); f.Frozen != 10 || f.Holds != 1 {
		t.Fatalf("figures %+v: want t held at the 10 its status says (the controller saw %v first)", f, v.Standing)
	}
	if v, err := h.l.View(frozen); err != nil || v.Standing != Held || v.Price != 10 {
		t.Fatalf("View(t) = %+v, %v: want Held at 10 (its status's cost, which never changes)", v, err)
	}
	h.books(h.settle(h.l), 100, 0, 10)
}

// Checked, holds: a journal entry whose task was deleted during the outage, while a new task of
// the same name is open and held. The crash came right after the charge's account write
// landed (before the task's Deducted); during the outage the tenant deleted the task, and a
// create of the name that the dead manager had sent (signed at 40) landed late. The new
// manager's books must keep the charge spent
// (the work was done), count the new task's hold once, forget the old entry (its task is gone;
// a read by name finds another UID), and charge the new task once.
func TestAJournalEntryWhoseTaskWasReplacedDuringTheOutageStaysSpentOnce(t *testing.T) {
	h := newHarness(t, 100)
	old := h.create(h.l, "t", 30)
	h.charge(h.l, old)
	h.books(h.settle(h.l), 100, 30, 0) // the manager dies before writing t's Deducted
	must(t, k8s.Delete(h.ctx, old))
	h.feedDelete(h.l, old) // (the dead manager's books do not matter: it is gone)

	// A create of the dead manager lands late: a new t, signed at 40.
	replacement := h.task("t")
	signer, err := NewSigner(testKey)
	must(t, err)
	signer.Sign(replacement, 40)
	must(t, k8s.Create(h.ctx, replacement))

	b := h.start(h.ctx, "ledger-2")
	if v, err := b.View(replacement); err != nil || v.Standing != Held || v.Price != 40 {
		t.Fatalf("View(the new t) = %+v, %v: want Held at 40", v, err)
	}
	b.Tidy(h.ns)
	a := h.settle(b)
	h.booksClosed(a, 100, 30, 40)
	h.charge(b, replacement)
	h.books(h.settle(b), 100, 70, 0)
}

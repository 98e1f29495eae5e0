package ledger

import (
	"errors"
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// A kubectl task's admission and a debit, written by one manager and counted by its successor
// (after 1b0e96c).

// frozenAt is the VideoTask controller's accept write of a task made with kubectl: its hold
// (charge Frozen) at cost.
func frozenAt(cost int64) func(*videogenv1alpha1.VideoTaskStatus) {
	return func(st *videogenv1alpha1.VideoTaskStatus) {
		st.Phase, st.Charge, st.Cost = videogenv1alpha1.TaskQueued, videogenv1alpha1.ChargeFrozen, &cost
	}
}

// A failover while a task made with kubectl is being admitted, with its template's price changed
// meanwhile. The deposed manager A admitted it at 10, and its accept write (charge Frozen, cost
// 10) is on its way; the new manager B prices it at 20 (the new price) and counts its own
// pending admission at 20. A's write lands first: B's informer brings a copy that shows an
// admission at 10, and observe turns B's pending entry into a hold at B's price, 20, not the 10
// the task's status holds (B's own status write then conflicts and Unadmit finds nothing
// pending). The books hold 10 points the task does not (a higher price held fewer: admissions
// beyond the balance), and charge 20 for a task whose cost says 10: the controller's Deducted
// write carries the books' price as cost, which the status rules refuse (cost never changes),
// so the task never says Deducted and its journal entry stays.
//
// Interleaving: kubectl creates "k"; B: Admit(k, 20) (pending); A's accept write lands (Frozen,
// cost 10); B's informer delivers it; B's status write conflicts: Unadmit(k); Charge(k).
func TestAnAdmissionWrittenByAnEarlierManagerHoldsTheCostItWrote(t *testing.T) {
	h := newHarness(t, 100)
	s := h.stepped("ledger-2", nil) // B
	task := h.task("k")
	must(t, k8s.Create(h.ctx, task))
	h.feed(s.l, task)
	must(t, admit(s.l, task, 20)) // B's controller, at the new price

	frozen := task.DeepCopy() // A's controller's accept write, from the same copy, lands first
	frozenAt(10)(&frozen.Status)
	must(t, k8s.Status().Update(h.ctx, frozen))
	h.feed(s.l, frozen)
	s.l.Unadmit(task) // B's own accept write (from the older copy) conflicted

	if f := h.figures(s.l); f.Frozen != 10 || f.Holds != 1 {
		t.Errorf("figures %+v: want the 10 the task's status holds frozen", f)
	}
	v, err := s.l.View(frozen)
	must(t, err)
	if v.Price != *frozen.Status.Cost {
		t.Errorf("the books hold the task at %d, its status at cost %d: the controller's Deducted write (cost %d) "+
			"is refused by the status rules", v.Price, *frozen.Status.Cost, v.Price)
	}
	s.chargeQueued(frozen)
	s.settle()
	// The controller ends the task at the price the books charged (videotask_finish.go).
	v, err = s.l.View(frozen)
	must(t, err)
	if v.Standing != Charged {
		t.Fatalf("view %+v, want Charged", v)
	}
	done := frozen.DeepCopy()
	ended(videogenv1alpha1.ChargeDeducted, videogenv1alpha1.TaskSucceeded, false)(&done.Status)
	done.Status.Cost = &v.Price
	if err := k8s.Status().Update(h.ctx, done); err != nil {
		t.Fatalf("the controller's Deducted write: %v", err)
	}
	s.l.Observe(done)
	h.feed(s.l, done)
	a := s.settle()
	h.booksClosed(a, 100, 10, 0)
}

// Checked, holds (a pin): a debit is admitted against the balance that a hold and a queued
// charge leave, and a REST create then finds what the debit took; the debit and the charge share
// one write, which lands but reports an error, and a new manager elected after it counts each
// once (the debit's journal entry answers its top-up: applied, not debited again).
//
// Interleaving: a held (60 of 100); Charge(a) queued; debit -40 queued (available 40); a debit of
// 1 and CreateTask(b, 1) refused (available 0); the write lands and fails; it is retried;
// manager ledger-3 rebuilds the books; ApplyTopUp(debit) on it.
func TestADebitAdmittedBesideAChargeAndAHoldIsCountedOnceAcrossAFailover(t *testing.T) {
	h := newHarness(t, 100)
	s := h.stepped("ledger-2", nil)
	a := h.create(s.l, "a", 60)
	h.books(s.settle(), 100, 0, 60)
	s.chargeQueued(a)
	debit := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "close"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: -40, Reference: "CLOSE-1", Note: "closing"}}
	must(t, k8s.Create(h.ctx, debit))
	if out, err := s.l.ApplyTopUp(debit); err != nil || !out.Queued {
		t.Fatalf("the debit of 40 against 40 available: %+v %v, want it queued", out, err)
	}
	more := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "more"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: -1, Reference: "CLOSE-2", Note: "closing"}}
	must(t, k8s.Create(h.ctx, more))
	if out, err := s.l.ApplyTopUp(more); err != nil || !out.Queued {
		t.Fatalf("a debit beyond the 0 available: %+v %v, want its refusal queued", out, err)
	}
	if out, err := s.l.ApplyTopUp(more); err != nil || !out.Queued {
		t.Fatalf("the refused debit asked again before the write: %+v %v, want its refusal still queued", out, err)
	}
	var short *InsufficientBalanceError
	if _, err := s.l.CreateTask(h.ctx, h.task("b"), 1); !errors.As(err, &short) || short.Available != 0 {
		t.Fatalf("a create beyond the 0 available: %v, want 402", err)
	}
	h.faults.accountUpdates.Store(1)
	h.books(s.settle(), 60, 60, 0)
	if h.faults.accountUpdates.Load() > 0 {
		t.Fatal("the write carrying the debit and the charge did not land and fail")
	}

	l3 := h.start(h.ctx, "ledger-3")
	if f := h.figures(l3); f.Credited != 60 || f.Spent != 60 || f.Frozen != 0 || f.Balance != 0 {
		t.Fatalf("the new manager's figures %+v: want credited 60, spent 60, nothing frozen or available", f)
	}
	if out, err := l3.ApplyTopUp(debit); err != nil || !out.Applied || out.BalanceAfter != 0 {
		t.Fatalf("the debit on the new manager: %+v %v, want applied (balance after 0)", out, err)
	}
	// The refusal, written with them, holds on the new manager too.
	if out, err := l3.ApplyTopUp(more); err != nil || !out.Refused || out.Reason != videogenv1alpha1.ReasonDebitExceedsBalance {
		t.Fatalf("the refused debit on the new manager: %+v %v, want refused", out, err)
	}
	h.books(h.settle(l3), 60, 60, 0)
}

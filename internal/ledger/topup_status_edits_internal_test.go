package ledger

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// refuse writes a refusal into the top-up's status as the controller does (Applied=False with
// the outcome's reason and message), and tells the ledger.
func (h *harness) refuse(l *Ledger, tu *videogenv1alpha1.PointTopUp, out TopUpOutcome) {
	h.t.Helper()
	must(h.t, k8s.Get(h.ctx, client.ObjectKeyFromObject(tu), tu))
	meta.SetStatusCondition(&tu.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied,
		Status: metav1.ConditionFalse, Reason: out.Reason, Message: out.Message})
	must(h.t, k8s.Status().Update(h.ctx, tu))
	l.ObserveTopUp(tu)
}

// A refused top-up's Applied condition cleared (or edited to another reason) by
// whoever may write pointtopups/status (the platform-admin role may: `kubectl edit
// --subresource=status`, a script that "resets" a stuck-looking top-up, a restored backup of
// an older status). Nothing in the CRD kept a refusal: its only status rule is about appliedAt.
//
// Steps (DebitExceedsBalance): 1. balance 50; close-out debit "close" (-100, CLOSE-1): refused,
// its Refusal entry written, its status says DebitExceedsBalance, the entry trimmed (the
// account's journal is empty, as after any settle). 2. Its status is edited: Applied=False
// reason AccountNotFound (or the condition removed). The kube-apiserver takes it. 3. A credit
// of 100 (INV-1) is applied: balance 150. 4. A new manager is elected (an upgrade, a failover)
// and builds its books from the lists: the top-up reads as neither refused nor applied, and the
// account's journal no longer has its Refusal, so nothing says it was refused. 5. The
// controller reconciles it: ApplyTopUp debits 100. The user saw: a debit the operator told them
// was refused for good (rule 6: "refused for good, never debited") taken from their balance
// weeks later, on whichever manager happened to rebuild (the old one would have refused it
// again from memory). The same reset on a DuplicateReference is refused again (the other
// top-up's reference is in the books); that case is pinned below.
//
// Fix: the CRD keeps a refused top-up refused (and an applied one's Applied=True): a status
// write that changes that condition's status or reason is refused by the kube-apiserver.
func TestARefusedDebitStaysRefusedWhateverItsStatusIsEditedTo(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*videogenv1alpha1.PointTopUpStatus)
	}{
		{"its condition removed", func(s *videogenv1alpha1.PointTopUpStatus) { s.Conditions = nil }},
		{"its reason edited to AccountNotFound", func(s *videogenv1alpha1.PointTopUpStatus) {
			s.Conditions[0].Reason = videogenv1alpha1.ReasonAccountNotFound
		}},
		{"its status edited to Unknown", func(s *videogenv1alpha1.PointTopUpStatus) {
			s.Conditions[0].Status = metav1.ConditionUnknown
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 50)
			closeOut, out := h.applyTopUp(h.l, "close", "CLOSE-1", -100)
			if !out.Refused || out.Reason != videogenv1alpha1.ReasonDebitExceedsBalance {
				t.Fatalf("the debit: %+v, want refused", out)
			}
			h.refuse(h.l, closeOut, out)
			h.booksClosed(h.settle(h.l), 50, 0, 0)

			must(t, k8s.Get(h.ctx, client.ObjectKeyFromObject(closeOut), closeOut))
			tc.edit(&closeOut.Status)
			if err := k8s.Status().Update(h.ctx, closeOut); err == nil {
				t.Logf("the kube-apiserver took the edit of a refused top-up's status")
			} else if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "a refused top-up stays refused") {
				t.Fatalf("the edit: %v, want it taken or refused by the CRD's rule", err)
			}
			if _, out := h.applyTopUp(h.l, "credit", "INV-1", 100); !out.Applied {
				t.Fatalf("the credit: %+v", out)
			}
			h.books(h.settle(h.l), 150, 0, 0)

			l2 := h.start(h.ctx, "ledger-2")
			must(t, k8s.Get(h.ctx, client.ObjectKeyFromObject(closeOut), closeOut))
			if out := h.reapply(l2, closeOut); !out.Refused || out.Reason != videogenv1alpha1.ReasonDebitExceedsBalance {
				t.Errorf("the refused debit asked again on a new manager: %+v, want refused (DebitExceedsBalance)", out)
			}
			h.books(h.settle(l2), 150, 0, 0)
		})
	}
}

// Checked, holds (a pin): a top-up refused as DuplicateReference whose condition is cleared by
// hand is refused again on a new manager: the reference it repeats is the other top-up's, which
// is applied (its status and the list say so), so the rebuilt books have it. The steps are
// those above: INV-5 credited (100); "again" (INV-5, 100) refused and its status says so;
// its condition removed; a new manager; "again" asked again.
func TestADuplicateWhoseRefusalIsClearedIsRefusedAgain(t *testing.T) {
	h := newHarness(t, 0)
	if _, out := h.applyTopUp(h.l, "paid", "INV-5", 100); !out.Applied {
		t.Fatalf("the first top-up: %+v", out)
	}
	again, out := h.applyTopUp(h.l, "again", "INV-5", 100)
	if !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference {
		t.Fatalf("INV-5 again: %+v, want refused as a duplicate", out)
	}
	h.refuse(h.l, again, out)
	h.booksClosed(h.settle(h.l), 100, 0, 0)

	must(t, k8s.Get(h.ctx, client.ObjectKeyFromObject(again), again))
	again.Status.Conditions = nil
	_ = k8s.Status().Update(h.ctx, again) // taken before the fix, refused after: either way

	l2 := h.start(h.ctx, "ledger-2")
	must(t, k8s.Get(h.ctx, client.ObjectKeyFromObject(again), again))
	if out := h.reapply(l2, again); !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference {
		t.Fatalf("INV-5 again on a new manager: %+v, want refused as a duplicate", out)
	}
	h.booksClosed(h.settle(l2), 100, 0, 0)
}

// A top-up marked applied by hand that was never credited. Whoever may write
// pointtopups/status sets appliedAt on a top-up not applied yet (`kubectl patch ptu inv-9
// --subresource=status -p '{"status":{"appliedAt":"..."}}'`: "the customer paid this at the
// desk, mark it done", or a restored backup of a status). The kube-apiserver takes it; from then
// on the CRD's rule keeps appliedAt, the delete policy keeps the top-up, and the controller
// (seeing appliedAt) never credits it: that part is what the edit says, and the administrator
// who wrote it asked for it. What they cannot predict is what happens to its reference:
//
// Steps: 1. "desk" (INV-9, 100) created; before the controller reaches it, its status gets
// appliedAt by hand (no accountUID). 2. The manager reconciles it: ObserveTopUp ignores it (its
// accountUID is not the account's), so INV-9 is not among the references used. 3. A new
// manager is elected and builds its books from the list: install reads a top-up with appliedAt
// and another accountUID as "applied to an earlier account of this namespace", so INV-9 is used.
// 4. The administrator, seeing the balance short, enters INV-9 again ("retry", 100). The user
// saw: on the manager that happened to run it, credited; on one that rebuilt its books since,
// refused for good as DuplicateReference "applied by PointTopUp desk to an earlier account of
// this namespace" (there was none). One edit, two outcomes decided by the last failover.
// Fixed so both managers agree with the list: ObserveTopUp records the reference of any top-up
// whose status says applied, as install does (rule 6: a reference a status says was applied is
// used for good).
func TestAHandSetAppliedAtCountsTheSameOnEveryManager(t *testing.T) {
	for _, failover := range []bool{false, true} {
		t.Run(map[bool]string{false: "the same manager", true: "after a failover"}[failover], func(t *testing.T) {
			h := newHarness(t, 0)
			desk := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "desk"),
				Spec: videogenv1alpha1.PointTopUpSpec{Amount: 100, Reference: "INV-9", Note: "test"}}
			must(t, k8s.Create(h.ctx, desk))
			desk.Status.AppliedAt = ptrNow()
			must(t, k8s.Status().Update(h.ctx, desk)) // the kube-apiserver takes appliedAt alone
			h.l.ObserveTopUp(desk)                    // the controller's reconcile: appliedAt set, nothing to apply
			if out, err := h.l.ApplyTopUp(desk); err != nil || !out.AlreadyApplied {
				t.Fatalf("the marked top-up: %+v %v, want AlreadyApplied (never credited)", out, err)
			}
			l := h.l
			if failover {
				l = h.start(h.ctx, "ledger-2")
			}
			_, out := h.applyTopUp(l, "retry", "INV-9", 100)
			if !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference {
				t.Fatalf("INV-9 entered again: %+v, want refused as a duplicate on every manager (the list says INV-9 was applied)", out)
			}
			h.booksClosed(h.settle(l), 0, 0, 0)
		})
	}
}

// A top-up marked refused by hand while its credit is already in the account's
// journal, its status not yet saying so. The audit policy lets only a refused top-up be
// deleted, and its message says so; an administrator who wants a top-up that looks stuck gone
// (no Applied condition: the manager crashed after the account write and before the status
// write, or is crash-looping, or the top-up waits in the reconcile queue) writes Applied=False/
// DuplicateReference into its status to be allowed to. The CRD takes it (its old status has no
// decided condition).
//
// Steps: 1. "inv" (INV-3, 100): ApplyTopUp queues it, the account write carries its entry
// (credited 100); its status is not written yet. 2. Its status is edited to Applied=False/
// DuplicateReference by hand. 3. The controller reconciles. 4. A new manager builds its books
// from the list. 5. INV-3 is entered again. Before the fix, step 3 marked the refusal shown and
// the journal entry went (the credit stayed), the new manager's books named no reference used,
// and step 5 credited the invoice again (balance 200) while the first top-up said "refused,
// nothing credited". Now the books win over a refusal in a status: the entry stays until the
// top-up's status shows appliedAt, ApplyTopUp answers Applied (the controller writes the credit
// over the refusal: the controllers package's test of a top-up refused by hand), and a rebuild keeps the
// reference from the journal.
func TestATopUpMarkedRefusedAfterItsCreditKeepsItsReference(t *testing.T) {
	h := newHarness(t, 0)
	inv := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "inv"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 100, Reference: "INV-3", Note: "test"}}
	must(t, k8s.Create(h.ctx, inv))
	out, err := h.l.ApplyTopUp(inv)
	must(t, err)
	if !out.Queued {
		t.Fatalf("the credit: %+v, want it queued", out)
	}
	if a := h.settle(h.l); len(a.Status.Journal) != 1 || a.Status.Credited != 100 {
		t.Fatalf("the account after the credit's write: %+v", a.Status)
	}

	must(t, k8s.Get(h.ctx, client.ObjectKeyFromObject(inv), inv))
	meta.SetStatusCondition(&inv.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied,
		Status: metav1.ConditionFalse, Reason: videogenv1alpha1.ReasonDuplicateReference, Message: "cleanup by hand"})
	must(t, k8s.Status().Update(h.ctx, inv)) // the kube-apiserver takes it
	h.l.ObserveTopUp(inv)                    // the controller's reconcile of a top-up refused for good
	if a := h.settle(h.l); len(a.Status.Journal) != 1 {
		t.Fatalf("the credit's journal entry after a refusal written by hand: %+v, want it kept", a.Status.Journal)
	}
	if out, err := h.l.ApplyTopUp(inv); err != nil || !out.Applied || out.BalanceAfter != 100 {
		t.Fatalf("the top-up refused by hand, asked about again: %+v, %v; want Applied with balance 100 after it", out, err)
	}

	l2 := h.start(h.ctx, "ledger-2")
	if _, out := h.applyTopUp(l2, "again", "INV-3", 100); !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference {
		t.Errorf("INV-3 entered again after a failover: %+v, want refused as a duplicate (its first top-up's 100 points are in the balance)", out)
	}
	h.books(h.settle(l2), 100, 0, 0)
}

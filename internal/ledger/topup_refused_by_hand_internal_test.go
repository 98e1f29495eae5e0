package ledger

import (
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Review of 7aa2059 ("the books win over a top-up refusal written by hand"): the
// hand-refused top-up DELETED before any manager writes its credit over the refusal.
//
// Steps: 1. "inv" (INV-3, 100): ApplyTopUp queues it, the account write carries its entry
// (credited 100); its status is not written (the manager crashes right after the account
// write, or crash-loops: its status writes never get through). 2. The administrator, seeing a
// top-up with no Applied condition for hours, writes Applied=False/DuplicateReference into its
// status (the CRD takes it: its old status has no decided condition) and 3. deletes it: the
// audit policy (config/policies/pointtopup_audit.yaml) reads only the status and allows it.
// Both steps are what the policy's message invites ("can be deleted only when refused").
// 4. A manager builds its books (the crashed one restarts, or another one is elected): the
// account's journal holds inv's entry, the top-up list no longer holds inv, so no reference is
// named used (the entry carries no reference), and the entry's fate check finds inv gone and
// drops it. 5. INV-3 is entered again (the payment webhook redelivered, a retry by a script).
// Before the fix, step 5 credited the invoice a second time: balance 200 for one invoice of
// 100, and nothing left in the cluster names INV-3 used.
//
// Fix: a second ValidatingAdmissionPolicy (pointtopup-credit-in-journal, its parameter the
// namespace's PointAccount) refuses the delete of a top-up whose credit is in the account's
// journal, whatever its status says; the controller then writes the credit over the refusal
// (topup_status_edits_internal_test.go) and the top-up stays, applied.
func TestTopUpRefusedByHandAndDeletedKeepsItsReference(t *testing.T) {
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
	// ledger-1 crashes here: inv's status is never written by it.

	must(t, k8s.Get(h.ctx, client.ObjectKeyFromObject(inv), inv))
	meta.SetStatusCondition(&inv.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied,
		Status: metav1.ConditionFalse, Reason: videogenv1alpha1.ReasonDuplicateReference, Message: "cleanup by hand"})
	must(t, k8s.Status().Update(h.ctx, inv)) // the CRD takes it
	// The administrator deletes it hours later: the kube-apiserver's copy of the account (the
	// policy's parameter, read from its informer) has the journal by then. A dry run until the
	// policy answers stands for those hours (without the fix it never does; the delete goes).
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && !apierrors.IsForbidden(k8s.Delete(h.ctx, inv.DeepCopy(), client.DryRunAll)) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := k8s.Delete(h.ctx, inv); err == nil {
		t.Errorf("the hand-refused top-up whose credit is in the journal was deleted; want it kept (its reference is used)")
	} else if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "credit is in the account's journal") {
		t.Fatalf("the delete of the hand-refused top-up: %v, want forbidden by the credit-in-journal policy", err)
	}

	l2 := h.start(h.ctx, "ledger-2")
	h.settle(l2) // the journal's fate check
	h.settle(l2)
	if _, out := h.applyTopUp(l2, "again", "INV-3", 100); !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference {
		t.Errorf("INV-3 entered again after its hand-refused top-up was deleted and a manager rebuilt: %+v, want refused as a duplicate (its first top-up's 100 points are in the balance)", out)
	}
	h.books(h.settle(l2), 100, 0, 0)

	l3 := h.start(h.ctx, "ledger-3") // and once more, after the journal has drained
	if _, out := h.applyTopUp(l3, "third", "INV-3", 100); !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference {
		t.Errorf("INV-3 entered a third time after another failover: %+v, want refused as a duplicate", out)
	}
	h.books(h.settle(l3), 100, 0, 0)
}

// Checked, holds: the CRD's exception (a refusal may become Applied=True in
// the write that first sets appliedAt, balanceAfter and accountUID) written by hand over a
// GENUINE refusal moves no points. A debit refused DebitExceedsBalance (its Refusal entry
// written and trimmed) is marked Debited by hand (`kubectl edit --subresource=status`; the
// kube-apiserver takes it); the balance then covers it. A stale copy of it from before its
// refusal (a lagging cache), asked of the running manager and of a manager built since, is
// never debited: ApplyTopUp reads the kube-apiserver's copy, and appliedAt there answers
// AlreadyApplied. The status lies (an administrator who may write statuses could already write
// appliedAt on a waiting top-up, TestAHandSetAppliedAtCountsTheSameOnEveryManager), the books do not.
func TestRefusedDebitMarkedDebitedByHandMovesNoPoints(t *testing.T) {
	h := newHarness(t, 50)
	closeOut, out := h.applyTopUp(h.l, "close", "CLOSE-1", -100)
	if !out.Refused || out.Reason != videogenv1alpha1.ReasonDebitExceedsBalance {
		t.Fatalf("the debit: %+v, want refused", out)
	}
	stale := closeOut.DeepCopy()
	h.refuse(h.l, closeOut, out)
	a := h.settle(h.l)
	h.booksClosed(a, 50, 0, 0)

	must(t, k8s.Get(h.ctx, client.ObjectKeyFromObject(closeOut), closeOut))
	after := int64(-50)
	closeOut.Status.AppliedAt, closeOut.Status.BalanceAfter, closeOut.Status.AccountUID = ptrNow(), &after, a.UID
	meta.SetStatusCondition(&closeOut.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied,
		Status: metav1.ConditionTrue, Reason: videogenv1alpha1.ReasonDebited, Message: "written by hand"})
	must(t, k8s.Status().Update(h.ctx, closeOut)) // the exception lets it
	h.l.ObserveTopUp(closeOut)

	if _, out := h.applyTopUp(h.l, "credit", "INV-1", 100); !out.Applied {
		t.Fatalf("the credit: %+v", out)
	}
	h.booksClosed(h.settle(h.l), 150, 0, 0)
	if out := h.reapply(h.l, stale); out.Applied || out.Queued {
		t.Errorf("a stale copy of the refused debit on the running manager: %+v, want nothing debited", out)
	}
	h.booksClosed(h.settle(h.l), 150, 0, 0)
	l2 := h.start(h.ctx, "ledger-2")
	if out := h.reapply(l2, stale); out.Applied || out.Queued {
		t.Errorf("a stale copy of the refused debit on a new manager: %+v, want nothing debited", out)
	}
	h.booksClosed(h.settle(l2), 150, 0, 0)
}

// What the credit-in-journal policy cannot see: the hand-refused top-up deleted
// while its credit is queued, before the account write that carries it lands. The policy
// reads the account's journal, which does not hold the entry yet.
//
// Steps (one manager, its writer stepped): 1. "inv" (INV-4, 100) is created and ApplyTopUp
// reads it (no condition) and queues its credit. 2. Before the account's next write (within
// the write interval), a cleanup script that refuses and deletes every top-up without an
// Applied condition (the audit policy's message invites exactly that) marks inv
// Applied=False/DuplicateReference and deletes it: both policies let it (the journal does not
// hold the credit yet). 3. The account write lands the credit (credited 100); the entry's fate
// check finds inv gone and drops it. The running manager keeps INV-4 in memory; 4. a manager
// that builds its books from the lists (failover, upgrade, restart) names INV-4 unused, and
// 5. INV-4 entered again is credited again: balance 200 for one invoice of 100, and nothing in
// the cluster shows the first credit but the counters.
//
// Fix: the PointTopUp controller puts FinalizerLedger on a top-up before it asks the ledger, and
// ApplyTopUp queues a credit only for a top-up carrying it (the harness creates top-ups with it,
// as the controller would). Step 2's delete leaves inv Terminating, listed; the entry's fate
// check reads it (no appliedAt: the refusal was written by hand) and keeps the entry; the
// controller is answered Applied (and writes the credit over the refusal, keeping the
// finalizer); a manager rebuilt before that write finds inv in the list and its entry in the
// journal, and names INV-4 used. Before the fix the delete went through, ApplyTopUp answered
// Gone after the write, and step 5 credited INV-4 again (balance 200).
func TestTopUpRefusedAndDeletedWhileItsCreditIsQueuedKeepsItsReference(t *testing.T) {
	h := newHarness(t, 0)
	s := h.stepped("ledger-2", nil)
	inv := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "inv"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 100, Reference: "INV-4", Note: "test"}}
	must(t, k8s.Create(h.ctx, inv))
	out, err := s.l.ApplyTopUp(inv)
	must(t, err)
	if !out.Queued {
		t.Fatalf("the credit: %+v, want it queued", out)
	}

	must(t, k8s.Get(h.ctx, client.ObjectKeyFromObject(inv), inv))
	meta.SetStatusCondition(&inv.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied,
		Status: metav1.ConditionFalse, Reason: videogenv1alpha1.ReasonDuplicateReference, Message: "cleanup by script"})
	must(t, k8s.Status().Update(h.ctx, inv))
	s.l.ObserveTopUp(inv.DeepCopy()) // the controller sees the refusal
	if err := k8s.Delete(h.ctx, inv); err != nil {
		t.Logf("the delete of the hand-refused top-up whose credit is queued: %v", err)
	}

	if a := s.settle(); a.Status.Credited != 100 {
		t.Fatalf("the account after the queued credit's write: %+v", a.Status)
	}
	if out, err := s.l.ApplyTopUp(inv); err != nil || !out.Applied {
		t.Fatalf("the controller's requeue after the write: %+v, %v; want Applied (the books hold its credit)", out, err)
	}
	// The controller's write of the credit over the refusal does not get through (a crash).
	s.settle() // the entry's fate check
	must(t, k8s.Get(h.ctx, client.ObjectKeyFromObject(inv), inv))
	if inv.DeletionTimestamp.IsZero() {
		t.Errorf("the deleted top-up whose credit was queued has no deletionTimestamp; want it kept by the ledger's finalizer")
	}
	if _, out := h.applyTopUp(s.l, "again", "INV-4", 100); !out.Refused {
		t.Fatalf("INV-4 again on the running manager: %+v, want refused (its books remember)", out)
	}

	l3 := h.start(h.ctx, "ledger-3")
	h.settle(l3)
	if _, out := h.applyTopUp(l3, "third", "INV-4", 100); !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference {
		t.Errorf("INV-4 entered again after a failover: %+v, want refused as a duplicate (its first top-up's 100 points are in the balance)", out)
	}
	h.books(h.settle(l3), 100, 0, 0)
}

// The guard of the fix above: ApplyTopUp queues nothing for a top-up without the
// ledger's finalizer (one the controller has not guarded yet, or whose finalizer was taken off
// by hand) and answers NeedsFinalizer, moving no point (the controller puts it on and asks again).
func TestTopUpWithoutTheLedgerFinalizerIsNotQueued(t *testing.T) {
	h := newHarness(t, 0)
	bare := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "bare"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 100, Reference: "INV-5", Note: "test"}}
	must(t, k8s.Create(h.ctx, bare))
	bare.Finalizers = nil
	must(t, k8s.Update(h.ctx, bare))
	if out, err := h.l.ApplyTopUp(bare); err != nil || !out.NeedsFinalizer {
		t.Errorf("a top-up without the ledger's finalizer: %+v, %v; want NeedsFinalizer", out, err)
	}

	h.books(h.settle(h.l), 0, 0, 0)
}

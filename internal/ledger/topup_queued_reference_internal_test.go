package ledger

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// A DuplicateReference refusal is decided from a reference that is only QUEUED in memory (the
// other top-up's entry not yet written), and it is final at once: the controller writes it into
// the second top-up's status (Applied False, DuplicateReference, "already applied to this
// account by PointTopUp X"), the audit policy then lets that top-up be deleted, and no manager
// ever looks at it again. Every other final word about a top-up waits for the account write
// that makes it durable (a credit: its journal entry; a DebitExceedsBalance refusal: its
// Refusal entry, "the refusal waits for the account's write"). This one does not: if the
// manager dies before the queued entry is written, a new manager decides the first top-up
// afresh, and a debit may then be refused (the balance moved meanwhile). The reference's debit
// then happened nowhere, while the retry's status says it happened.
//
// Interleaving (manager ledger-2 elected, its account writes stepped by hand; then ledger-3):
//  1. Balance 150. An administrator closes the account: debit "close" (-100, reference
//     CLOSE-1). ApplyTopUp queues it (available 50).
//  2. Not seeing it applied yet (its status waits for the write, up to a second, longer under
//     load), the administrator retries with the same reference, as references exist for:
//     "close-retry" (-100, CLOSE-1). ApplyTopUp refuses it DuplicateReference, naming "close";
//     the controller writes that status and observes it.
//  3. ledger-2 dies (OOM, node loss) before its account write: the debit is nowhere durable.
//  4. ledger-3 is elected and builds its books: credited 150, no debit, "close" not applied.
//  5. A tenant's REST create admits a task at 100 (available 150) before the PointTopUp
//     controller of ledger-3 gets to "close" (its work queue is FIFO over every namespace's
//     top-ups; the REST create is a separate request path).
//  6. ApplyTopUp("close") on ledger-3: 100 > 50 available: refused DebitExceedsBalance.
//
// Reachable: 1-2 are two kubectl/videogenctl calls by an administrator within one write
// interval (or while the account write retries against a slow kube-apiserver); 3 is a crash
// between two writes, which the design covers for every other decision; 4 is a failover; 5 is
// an ordinary tenant request; 6 is the code path.
//
// What a user sees: "close-retry" says reference CLOSE-1 was applied by "close"; "close" says it
// was refused; the account still has 50 points available and 100 held, so it cannot be
// deleted, and the administrator, told by "close-retry" that the debit was done, has no record
// saying otherwise except by cross-reading both. (ledger-2 also answered 402 to creates in the
// second between 1 and 3 for a debit that never happened.) The status of "close-retry" lies:
// refused as a duplicate of a top-up that was never applied.
//
// Suggested fix (words only): when the reference belongs to a top-up whose entry is only
// queued (b.queued has its UID, not yet in the journal), answer Queued, not Refused: the
// duplicate is decided once the other's entry has landed (landed requeues both top-ups of the
// reference, or the 10 s requeue picks it up). Only a reference in the journal, in an applied
// top-up's status or in an earlier account's, makes a final DuplicateReference.
func TestADuplicateReferenceIsNotRefusedForAnotherTopUpThatIsOnlyQueued(t *testing.T) {
	h := newHarness(t, 150)
	s := h.stepped("ledger-2", nil)

	// Step 1.
	closeTopUp := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "close"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: -100, Reference: "CLOSE-1", Note: "closing"}}
	must(t, k8s.Create(h.ctx, closeTopUp))
	if out, err := s.l.ApplyTopUp(closeTopUp); err != nil || !out.Queued {
		t.Fatalf("the debit of 100 against 150: %+v %v, want it queued", out, err)
	}
	// Step 2: the retry, with the same reference.
	retry := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "close-retry"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: -100, Reference: "CLOSE-1", Note: "closing, again"}}
	must(t, k8s.Create(h.ctx, retry))
	out, err := s.l.ApplyTopUp(retry)
	must(t, err)
	retryRefused := out.Refused
	if out.Refused {
		// The controller's Refused branch: the status, then ObserveTopUp.
		meta.SetStatusCondition(&retry.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied,
			Status: metav1.ConditionFalse, Reason: out.Reason, Message: out.Message})
		must(t, k8s.Status().Update(h.ctx, retry))
		s.l.ObserveTopUp(retry)
	}
	// Step 3: ledger-2 dies before its write (its stepped clock never moves again).

	// Step 4: ledger-3.
	l3 := h.start(h.ctx, "ledger-3")
	if f := h.figures(l3); f.Credited != 150 || f.Balance != 150 {
		t.Fatalf("the new manager's figures %+v: want credited 150, nothing debited yet", f)
	}
	// Step 5: a REST create admitted at 100.
	h.create(l3, "t", 100)
	// Step 6: the controller of ledger-3 gets to "close" (a stale cache copy; ApplyTopUp reads it).
	closeOut := h.reapply(l3, closeTopUp)
	retryOut := h.reapply(l3, retry)
	h.books(h.settle(l3), 150, 0, 100)

	if retryRefused && retryOut.Reason == videogenv1alpha1.ReasonDuplicateReference && !closeOut.Applied {
		t.Fatalf("reference CLOSE-1 was debited by nobody, yet %q says %q; %q itself: %+v. "+
			"A DuplicateReference refusal was made final from a reference only queued in the manager that died",
			retry.Name, retryOut.Message, closeTopUp.Name, closeOut)
	}
	if retryOut.Refused && retryOut.Reason == videogenv1alpha1.ReasonDuplicateReference &&
		!strings.Contains(retryOut.Message, closeTopUp.Name) {
		t.Fatalf("the retry refused as a duplicate of another top-up than %q: %+v", closeTopUp.Name, retryOut)
	}
}

// Checked, holds (a pin): a debit refused for the balance, its status written and its Refusal
// entry forgotten, is asked about again from a copy older than that status (the PointTopUp
// controller's cache lags, or a reconcile queued before the status write runs after it) once
// a credit made the balance cover it, on this manager and on a new one. ApplyTopUp reads the
// top-up before deciding (the fresh read), so the stale copy is refused again, never debited.
//
// Interleaving: balance 50; debit "big" (-100) refused, its Refusal entry written; its status
// (DebitExceedsBalance) written and observed; the next write forgets the entry; credit "pay"
// (+100) applied (available 150); ApplyTopUp(the copy of "big" from before its status) on
// ledger-1, then on ledger-3 built after.
//
// Reachable: each step is the PointTopUp controller's own path; a copy older than the status
// is what a lagging informer cache hands a reconcile requeued by the ledger's own wake-up
// (landed requeues the top-up) or by a PointAccount event (pendingTopUps).
func TestARefusedDebitAskedAgainFromAStaleCopyAfterItsEntryWentStaysRefused(t *testing.T) {
	h := newHarness(t, 50)
	l := h.l
	big := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "big"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: -100, Reference: "BIG-1", Note: "too much"}}
	must(t, k8s.Create(h.ctx, big))
	stale := big.DeepCopy()
	out := h.reapply(l, big)
	if !out.Refused || out.Reason != videogenv1alpha1.ReasonDebitExceedsBalance {
		t.Fatalf("a debit of 100 against 50: %+v, want refused", out)
	}
	meta.SetStatusCondition(&big.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied,
		Status: metav1.ConditionFalse, Reason: out.Reason, Message: out.Message})
	must(t, k8s.Status().Update(h.ctx, big))
	l.ObserveTopUp(big)
	l.Tidy(h.ns)
	waitFor(t, func() bool { return len(h.account().Status.Journal) == 0 })

	if _, pay := h.applyTopUp(l, "pay", "PAY-1", 100); !pay.Applied {
		t.Fatalf("the credit: %+v", pay)
	}
	h.settle(l)
	l.Tidy(h.ns)
	waitFor(t, func() bool { return len(h.account().Status.Journal) == 0 })
	if got := h.reapply(l, stale); !got.Refused || got.Reason != videogenv1alpha1.ReasonDebitExceedsBalance {
		t.Fatalf("the refused debit asked again from a stale copy, 150 available: %+v, want refused", got)
	}
	h.booksClosed(h.settle(l), 150, 0, 0)

	l3 := h.start(h.ctx, "ledger-3")
	if got := h.reapply(l3, stale); !got.Refused || got.Reason != videogenv1alpha1.ReasonDebitExceedsBalance {
		t.Fatalf("the refused debit asked of a new manager from a stale copy: %+v, want refused", got)
	}
	h.booksClosed(h.settle(l3), 150, 0, 0)
}

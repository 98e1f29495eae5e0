package ledger

import (
	"errors"
	"strings"
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// A top-up credited before its status says so keeps its reference across a rebuild
// (after 0839624).

// Rule 6 says a reference is unique in its namespace, for good. The books remember the
// reference of a top-up in memory from ApplyTopUp on; a manager elected later rebuilds them
// from the PointTopUps that exist (a journal entry names its top-up, not its reference). A
// top-up whose credit had landed but whose status did not say Applied yet could be deleted (the
// admission policy protected only a top-up whose status showed appliedAt): from then on nothing
// durable recorded its reference, and a new manager credited a second top-up with it (a payment
// connector re-creating a top-up it finds missing; `kubectl delete -f; kubectl apply -f`). The
// policy now lets a top-up go only once it was refused, which credits nothing.
//
// Interleaving: PointTopUp pay-1 (PAY-1, +100) applied, its credit in the journal, its status
// not written yet; its deletion; PointTopUp pay-1-again (PAY-1, +100); manager failover.
func TestATopUpCreditedBeforeItsStatusCannotBeDeletedAndKeepsItsReference(t *testing.T) {
	h := newHarness(t, 0)
	first := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "pay-1"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 100, Reference: "PAY-1", Note: "payment"}}
	must(t, k8s.Create(h.ctx, first))
	waitFor(t, func() bool { out, err := h.l.ApplyTopUp(first); must(t, err); return out.Applied })
	h.books(h.settle(h.l), 100, 0, 0)

	// Its status does not say Applied yet: the deletion is refused all the same (by either
	// policy: the audit trail's, or the one reading the account's journal;
	// which one answers first is not fixed).
	err := k8s.Delete(h.ctx, first)
	if err == nil || !strings.Contains(err.Error(), "may be being credited") && !strings.Contains(err.Error(), "whose credit is in the account's journal") {
		t.Fatalf("deleting a top-up whose credit landed, before its status says so: %v, want it refused", err)
	}
	again := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "pay-1-again"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 100, Reference: "PAY-1", Note: "payment"}}
	must(t, k8s.Create(h.ctx, again))
	for _, l := range []*Ledger{h.l, h.start(h.ctx, "ledger-2")} { // the manager that credited it, then a new one
		out, err := l.ApplyTopUp(again)
		if errors.Is(err, ErrNotReady) {
			t.Fatal("the new manager's books are not built")
		}
		must(t, err)
		if !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference || !strings.Contains(out.Message, "PAY-1") {
			t.Fatalf("a second top-up with reference PAY-1: %+v, want refused DuplicateReference", out)
		}
	}
	h.books(h.settle(h.l), 100, 0, 0)
}

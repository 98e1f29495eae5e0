package ledger

import (
	"errors"
	"testing"
)

// The controller records in a task's status the account its View named (status.accountUID), so
// Admit must count the task against that account or not at all. Interleaving: a kubectl task k
// waits unadmitted in an empty account; the controller reads its View (account A); before its
// Admit, A is closed and created again as B (a script's `kubectl delete --wait && kubectl
// apply`), and B's books, built from a fresh list, have k unadmitted. Admitted then, k would
// hold B's points while its status names A: the audit trail would say the wrong account.
func TestAdmitCountsATaskOnlyAgainstTheAccountItsViewNamed(t *testing.T) {
	h := newHarness(t, 0)
	first := h.withFinalizer()
	h.l.accountEvent(h.ctx, first.DeepCopy(), false)
	h.settle(h.l)

	k := h.task("k")
	must(t, k8s.Create(h.ctx, k))
	h.feed(h.l, k)
	before, err := h.l.View(k)
	must(t, err)
	if before.Standing != Unadmitted || before.Account != first.UID {
		t.Fatalf("View(k) = %+v, want Unadmitted in account %s", before, first.UID)
	}

	h.closeAccount(h.l)
	second := h.recreate(h.l)
	if err := h.l.Admit(k, 0, before.Account); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Admit(k) against the closed account %s once the books are %s's: %v, want ErrNotReady (ask again)",
			first.UID, second.UID, err)
	}
	if got := h.figures(h.l); got.Holds != 0 {
		t.Fatalf("the refused Admit left %d holds in the new account's books", got.Holds)
	}

	after, err := h.l.View(k)
	must(t, err)
	if after.Account != second.UID {
		t.Fatalf("View(k) after the re-creation names account %s, want %s", after.Account, second.UID)
	}
	if err := h.l.Admit(k, 0, after.Account); err != nil {
		t.Fatalf("Admit(k) against the account its View names: %v", err)
	}
}

package ledger

import (
	"errors"
	"testing"
)

// Found by CI (controllers, "says Funded=False when the balance is spent"): a kubectl task
// created once kubectl get pointaccount showed the account's first credit was refused for good,
// Failed InsufficientBalance "the account has 0 points available". The ledger's write of the
// credit had landed (the account showed it), and its answer had not reached the books yet: Admit
// refused from books that did not count it. Interleaving: a credit of 50 is queued; the write
// carrying it lands and its answer waits; a kubectl task of 10 asks Admit.
func TestAKubectlTaskIsNotRefusedWhileACreditsWriteIsOnItsWay(t *testing.T) {
	h := newHarness(t, 0)
	stall := newStalling()
	s := h.stepped("ledger-2", stall.wrap)
	credit := h.topUp("credit", "INV-1", 50)
	if out, err := s.l.ApplyTopUp(credit); err != nil || !out.Queued {
		t.Fatalf("the credit: %+v %v, want it queued", out, err)
	}
	k := h.task("k")
	must(t, k8s.Create(h.ctx, k))
	h.feed(s.l, k)

	stall.armed.Store(true)
	if !s.stepUntilLanded(stall) {
		t.Fatal("the credit's write was not sent")
	}
	if got := h.account().Status.Balance; got != 50 {
		t.Fatalf("the account shows balance %d, want the credit of 50 landed", got)
	}
	if err := admit(s.l, k, 10); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Admit of a 10-point kubectl task while the account shows 50 and the write's answer is on its way: %v, want ErrNotReady (ask again)", err)
	}
	close(stall.released)
	waitFor(t, func() bool {
		b := s.l.book(h.ns)
		b.mu.Lock()
		defer b.mu.Unlock()
		return !b.writing && len(b.queued) == 0
	})
	if err := admit(s.l, k, 10); err != nil {
		t.Fatalf("Admit once the books have the credit: %v", err)
	}
}

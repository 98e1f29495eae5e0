package ledger

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Found by a GitOps user: a new account's credits and a debit committed together (one kubectl
// apply, one Flux sync) had the debit refused for good, DebitExceedsBalance "exceeds the 0
// points available", whenever its reconcile came before its credits': the books counted only
// the top-ups already decided. Top-ups are now counted in the order they were made: a debit
// the balance does not cover waits while a credit made no later than it is still to be
// decided, and is refused only against the balance those credits leave.
func TestADebitMadeWithItsCreditsWaitsForThem(t *testing.T) {
	h := newHarness(t, 0)
	s := h.stepped("ledger-2", nil) // the account is written only when the test steps its clock
	credit := h.topUp("credit", "INV-1", 500)
	debit := h.topUp("debit", "CORR-1", -50)
	waits := func(when string) {
		t.Helper()
		_, err := s.l.ApplyTopUp(debit)
		if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "PointTopUp credit") {
			t.Fatalf("a debit of 50 made with a credit of 500 %s: %v, want it to wait for that credit", when, err)
		}
	}
	// The debit's reconcile comes first: it waits, nothing is refused or debited.
	waits("not applied yet")
	// The credit is queued: not in the balance until the account's next write.
	if out, err := s.l.ApplyTopUp(credit); err != nil || !out.Queued {
		t.Fatalf("the credit: %+v %v, want it queued", out, err)
	}
	waits("queued for the account's next write")
	s.settle()
	if out, err := s.l.ApplyTopUp(debit); err != nil || !out.Queued {
		t.Fatalf("the debit once its credit is written: %+v %v, want it queued", out, err)
	}
	h.books(s.settle(), 450, 0, 0)
	if out, err := s.l.ApplyTopUp(debit); err != nil || !out.Applied {
		t.Fatalf("the debit after the account's write: %+v %v, want it applied", out, err)
	}
}

// A credit made after the debit does not hold it back: the debit is decided against the
// balance the top-ups made before it leave (here none), as an administrator who made it first
// would expect. And a closing account's debit (what closes it) waits for no credit: credits
// then wait for the account created after it.
func TestADebitWaitsOnlyForCreditsMadeBeforeIt(t *testing.T) {
	h := newHarness(t, 0)
	debit := h.topUp("debit", "CORR-1", -50)
	time.Sleep(1100 * time.Millisecond) // creation times are to the second
	h.topUp("credit", "INV-1", 500)
	out := h.outcome(h.l, debit)
	if !out.Refused || !strings.Contains(out.Message, "exceeds the 0 points available") {
		t.Fatalf("a debit made before any credit: %+v, want refused against 0 points", out)
	}

	closing := newHarness(t, 0) // empty: the policy lets it be deleted
	closing.withFinalizer()
	closing.l.accountEvent(closing.ctx, closing.account(), false)
	closing.settle(closing.l)
	must(t, k8s.Delete(closing.ctx, closing.account()))
	closing.l.accountEvent(closing.ctx, closing.account(), false)
	closing.settle(closing.l)
	pay := closing.topUp("pay", "INV-9", 50)
	if _, err := closing.l.ApplyTopUp(pay); !errors.Is(err, ErrAccountClosing) {
		t.Fatalf("a credit to a closing account: %v, want ErrAccountClosing", err)
	}
	if out := closing.outcome(closing.l, closing.topUp("late", "CORR-9", -10)); !out.Refused {
		t.Fatalf("a closing account's debit beyond its 0 points, a credit waiting for the next account: %+v, want refused", out)
	}
}

package ledger

import (
	"errors"
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// The closing gate of a credit (closing_account_credit_internal_test.go) read
// only the books' copy of the account, which comes with the account informer's events. An
// administrator deletes an empty account (the admission policy lets it: its status says 0)
// and, a moment later, a payment's PointTopUp is created; the manager's informer has not
// delivered the deletion yet (a watch that lags, a relist). ApplyTopUp queued the credit, and
// the write, which met the deletion as a conflict and re-read the account, wrote it to the
// closing account all the same: 50 points on an account that takes no task and now cannot
// close until they are debited away, and the invoice's reference used there, so the account
// created after it refuses the invoice (DuplicateReference). docs/ledger.md promised "a
// credit made while the account is closing is not applied to it", leaving only a credit
// queued "just before the deletion reached its books, about a second"; with a lagging
// informer that second has no bound.
//
// Want: the credit waits (ErrAccountClosing), nothing is credited, the account may go.
func TestACreditAfterADeletionTheBooksHaveNotSeenWaitsForTheNextAccount(t *testing.T) {
	h := newHarness(t, 0)
	h.withFinalizer()
	l := h.l
	l.accountEvent(h.ctx, h.account(), false)
	h.booksClosed(h.settle(l), 0, 0, 0)

	// Deleted; the informer has not brought the deletion to the books.
	must(t, k8s.Delete(h.ctx, h.account()))

	out, err := l.ApplyTopUp(h.topUp("pay", "INV-27", 50))
	if !errors.Is(err, ErrAccountClosing) {
		acct := h.settle(l)
		t.Fatalf("a credit of 50 made after the account's deletion: %+v %v, want ErrAccountClosing; the closing account has credited %d, journal %d entries",
			out, err, acct.Status.Credited, len(acct.Status.Journal))
	}
	l.accountEvent(h.ctx, h.account(), false) // the deletion's event comes
	h.booksClosed(h.settle(l), 0, 0, 0)
	if err := l.Closable(h.ns); err != nil {
		t.Fatalf("the closing account: %v, want closable", err)
	}

	// Gone and created again: the credit, and its reference, are the new account's.
	acct := h.account()
	acct.Finalizers = nil
	must(t, k8s.Update(h.ctx, acct))
	l.accountEvent(h.ctx, acct.DeepCopy(), true)
	second := h.recreate(l)
	if out := h.reapply(l, h.topUpNamed("pay")); !out.Applied || out.AccountUID != string(second.UID) {
		t.Fatalf("the waiting credit: %+v, want applied to the account created after (%s)", out, second.UID)
	}
	h.books(h.settle(l), 50, 0, 0)
}

// The same read when the books lag a replacement: the account closed and was created again
// (another UID) with none of its events delivered. The credit is not queued for the books'
// account, which is gone (its write could never land, and the top-up would say Queued), but
// waits for the events (not ready), and goes to the account that is there once they come.
func TestACreditWhileTheBooksLagTheAccountsReplacementWaitsForItsEvents(t *testing.T) {
	h := newHarness(t, 0)
	h.withFinalizer()
	l := h.l
	l.accountEvent(h.ctx, h.account(), false)
	h.booksClosed(h.settle(l), 0, 0, 0)
	if err := l.Closable(h.ns); err != nil {
		t.Fatalf("the empty account: %v, want closable", err)
	}
	// Deleted, let go and created again; the informer delivers none of it yet.
	must(t, k8s.Delete(h.ctx, h.account()))
	gone := h.account()
	gone.Finalizers = nil
	must(t, k8s.Update(h.ctx, gone))
	must(t, k8s.Create(h.ctx, &videogenv1alpha1.PointAccount{ObjectMeta: objectMeta(h.ns, videogenv1alpha1.PointAccountName)}))

	pay := h.topUp("pay", "INV-27B", 50)
	if out, err := l.ApplyTopUp(pay); !errors.Is(err, ErrNotReady) {
		t.Fatalf("a credit while the books hold the account that went: %+v %v, want ErrNotReady (wait for its events)", out, err)
	}
	l.accountEvent(h.ctx, gone.DeepCopy(), true)
	second := h.withFinalizer()
	l.accountEvent(h.ctx, second.DeepCopy(), false) // the new account's Add
	b := l.book(h.ns)
	waitFor(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return !b.building && b.account != nil && b.account.UID == second.UID
	})
	if out := h.reapply(l, h.topUpNamed("pay")); !out.Applied || out.AccountUID != string(second.UID) {
		t.Fatalf("the credit once the events came: %+v, want applied to %s", out, second.UID)
	}
	h.books(h.settle(l), 50, 0, 0)
}

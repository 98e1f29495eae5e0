package ledger

import (
	"errors"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// ApplyTopUp credited an account being
// closed. An administrator deletes an account (its finalizer keeps it until it is empty) while
// a payment top-up for it is made (kubectl apply of an invoice, or a billing job): the credit
// lands on the closing account, where no task can spend it (it takes none) and which it keeps
// from closing; the administrator is told to debit it away, and the invoice's reference is then
// used, so the account created after it refuses the invoice as DuplicateReference. Inside a
// namespace being deleted, the namespace stays Terminating for good (no debit can be created
// there).
//
// Want: a credit to a closing account waits (ErrAccountClosing: the controller says so in the
// top-up's status, Applied=False AccountClosing, and asks again when the account changes),
// nothing is credited and its reference stays free, and the account goes; once the account is gone and created again, the waiting credit goes to the
// new one. Failed before the fix: ApplyTopUp queued the credit of 50 (err nil).
func TestACreditToAClosingAccountWaitsForTheNextAccount(t *testing.T) {
	h := newHarness(t, 100)
	h.withFinalizer()
	l := h.l
	l.accountEvent(h.ctx, h.account(), false)
	h.books(h.settle(l), 100, 0, 0)

	// Closed as docs/ledger.md says: what is left debited, then the account deleted (kept by
	// the ledger's finalizer until its status says it is empty).
	if _, out := h.applyTopUp(l, "close", "CLOSE-9", -100); !out.Applied {
		t.Fatalf("the closing debit: %+v, want applied", out)
	}
	h.booksClosed(h.settle(l), 0, 0, 0) // the debit takes it from credited
	must(t, k8s.Delete(h.ctx, h.account()))
	l.accountEvent(h.ctx, h.account(), false)
	h.settle(l)

	// A payment arrives meanwhile: it waits, nothing is credited.
	_, err := l.ApplyTopUp(h.topUp("pay", "INV-9", 50))
	if !errors.Is(err, ErrAccountClosing) {
		t.Fatalf("a credit of 50 to a closing account: %v, want ErrAccountClosing (it waits for the next account)", err)
	}
	h.booksClosed(h.settle(l), 0, 0, 0)
	if err := l.Closable(h.ns); err != nil {
		t.Fatalf("the closing account after a credit was asked of it: %v, want closable", err)
	}

	// Gone, and created again: the waiting credit is the new account's, its reference free.
	acct := h.account()
	acct.Finalizers = nil
	must(t, k8s.Update(h.ctx, acct))
	l.accountEvent(h.ctx, acct.DeepCopy(), true)
	second := h.recreate(l)
	pay := h.topUpNamed("pay")
	if out := h.reapply(l, pay); !out.Applied || out.AccountUID != string(second.UID) {
		t.Fatalf("the waiting credit on the account created after the closed one: %+v, want applied to %s", out, second.UID)
	}
	h.books(h.settle(l), 50, 0, 0)
}

// topUp creates a top-up of the harness's namespace (with the ledger's finalizer, as every
// test top-up) and returns it, not yet applied.
func (h *harness) topUp(name, reference string, amount int64) *videogenv1alpha1.PointTopUp {
	h.t.Helper()
	tu := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, name),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: amount, Reference: reference, Note: "test"}}
	must(h.t, k8s.Create(h.ctx, tu))
	return tu
}

// topUpNamed reads a top-up of the harness's namespace.
func (h *harness) topUpNamed(name string) *videogenv1alpha1.PointTopUp {
	h.t.Helper()
	tu := &videogenv1alpha1.PointTopUp{}
	must(h.t, k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, tu))
	return tu
}

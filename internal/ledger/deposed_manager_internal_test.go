package ledger

import (
	"errors"
	"testing"

	"k8s.io/client-go/util/retry"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Overdrawn is the one verdict of the books that
// undoes another manager's decision: a task showing an admission this ledger did not count,
// which the balance it knows does not cover, is refused by the controller (reject: its running
// stages cancelled, Failed, InsufficientBalance, for good). A deposed manager that has not yet
// met its successor's fence still answers View from its own books, whose balance misses
// whatever the successor credited: it finds the successor's admissions overdrawn, and its
// controller kills tasks the elected manager holds and the account covers. The fence stops its
// account writes (they conflict, and it steps down), not its task writes: the reject is a
// compare-and-swap on the task from a current copy, so it lands.
//
// Interleaving (A the manager elected first, B the next):
//  1. A keeps the books: credited 100, nothing held.
//  2. A is paused past its Lease (a frozen VM, a long GC). B is elected, fences the account,
//     credits a PointTopUp of 50 (credited 150) and admits a REST task t at 120.
//  3. A resumes. Its watches deliver the account (B's fence: A's writer is scheduled and will
//     step down after its next commit) and t; t's handler runs first: A counts t's admission
//     against its 100, finds it overdrawn, and requeues t.
//  4. A's VideoTask controller: View(t) → Overdrawn → reject: t's running analyze stage (B's
//     controller dispatched it) is cancelled at the backend, t ends Failed, insufficient_balance.
//
// Reachable: a pause is what fencing exists for; after it, A's informer events and its
// writer's commit race (the writer first waits out WriteInterval, then needs a write, a read
// and a Lease read before it steps down), and a reconcile needs one View and one status write.
// What a user sees: a task accepted (202) and running, on an account with 150 points, fails
// "the account's points no longer covered this task"; GET /v1/balance (B) said 30 available.
func TestADeposedManagerDoesNotFindATaskItsSuccessorAdmittedOverdrawn(t *testing.T) {
	h := newHarness(t, 100)
	var ls lease
	ls.take("ledger-A")
	a := h.startWith(h.ctx, "ledger-A", func(cfg *Config) { cfg.Lease = ls.of("ledger-A") })
	h.books(h.settle(a), 100, 0, 0)

	// 2. B elected: fence, books, a top-up and a REST create.
	ls.take("ledger-B")
	b := h.startWith(h.ctx, "ledger-B", func(cfg *Config) { cfg.Lease = ls.of("ledger-B") })
	if _, out := h.applyTopUp(b, "pay", "INVOICE-1", 50); !out.Applied {
		t.Fatalf("B's top-up: %+v", out)
	}
	task := h.create(b, "t", 120)
	h.feed(b, task)
	h.books(h.settle(b), 150, 0, 120)

	// 3. A's informer delivers t before A's writer met B's fence.
	h.feed(a, task)
	// 4. A's controller asks about t.
	if v, err := a.View(task); err == nil && v.Standing == Overdrawn {
		t.Fatalf("the deposed manager A finds t overdrawn (its controller would refuse it, cancelling its stage), " +
			"though B, elected, holds it and the account has 150 points")
	}
	if v, err := b.View(task); err != nil || v.Standing != Held {
		t.Fatalf("B's view of t: %+v, %v; want Held", v, err)
	}
	waitFor(t, func() bool { return !a.Ready() })
	expectDeposed(t, a)
}

// The same for a task made with kubectl: its first reconcile prices it and asks Admit, and a
// refusal is final (reject: Failed, InsufficientBalance). A deposed manager that has not met
// its successor's fence refuses it from a balance that misses the successor's credits; both
// managers' controllers reconcile the new task, and whichever status write comes first lands.
//
// Interleaving: steps 1-2 as above, without the REST create (B credited 50: 150 available);
// 3. a kubectl task k at 120 is created; A's informer delivers it before A's writer met B's
// fence; 4. A's controller: View(k) → Unadmitted; Admit(k, 120).
// What a user sees: kubectl get videotask k: Failed, "the account has 100 points available
// and this task costs 120", on an account with 150.
func TestADeposedManagerDoesNotRefuseAKubectlTaskTheAccountCovers(t *testing.T) {
	h := newHarness(t, 100)
	var ls lease
	ls.take("ledger-A")
	a := h.startWith(h.ctx, "ledger-A", func(cfg *Config) { cfg.Lease = ls.of("ledger-A") })
	h.books(h.settle(a), 100, 0, 0)

	ls.take("ledger-B")
	b := h.startWith(h.ctx, "ledger-B", func(cfg *Config) { cfg.Lease = ls.of("ledger-B") })
	if _, out := h.applyTopUp(b, "pay", "INVOICE-1", 50); !out.Applied {
		t.Fatalf("B's top-up: %+v", out)
	}
	h.books(h.settle(b), 150, 0, 0)

	task := h.task("k")
	must(t, k8s.Create(h.ctx, task))
	h.feed(a, task)
	if v, err := a.View(task); err != nil || v.Standing != Unadmitted {
		t.Fatalf("A's view of k: %+v, %v; want Unadmitted", v, err)
	}
	var short *InsufficientBalanceError
	if err := admit(a, task, 120); errors.As(err, &short) {
		t.Fatalf("the deposed manager A refuses k (%v; its controller ends it Failed for good), "+
			"though B, elected, has 150 points available", err)
	}
	h.feed(b, task)
	if err := admit(b, task, 120); err != nil {
		t.Fatalf("B's Admit(k, 120): %v", err)
	}
	waitFor(t, func() bool { return !a.Ready() })
	expectDeposed(t, a)
}

// The same for an account's close: the PointAccount controller removes the ledger's finalizer
// once Closable says the books are empty, with a patch guarded only by the resourceVersion of
// its cached copy. A deposed manager's books miss what its successor wrote: a credit applied
// to the closing account (a customer's payment turned into a PointTopUp as the account is
// closed) is not in them, so Closable answers nil, and the finalizer patch, made from the
// cache's current copy (the successor's write), lands: the account goes with the points the
// successor credited, and the PointTopUp says Applied, BalanceAfter 50, to an account that no
// longer exists.
//
// Interleaving: 1. A keeps the books of an empty account; an administrator deletes it (the
// finalizer keeps it; A writes Closing). 2. A is paused; B is elected, fences it, and applies
// a PointTopUp of +50 (the account: credited 50, balance 50). 3. A resumes; its PointAccount
// controller reconciles the account (B's write is its event) before A's writer met the fence:
// Closable. Step 2 can no longer be made (a credit to a closing account waits for the
// next account): the test checks B's credit waits, and A's books stay true of the account.
func TestADeposedManagerDoesNotCloseAnAccountItsSuccessorCredited(t *testing.T) {
	h := newHarness(t, 0)
	var ls lease
	ls.take("ledger-A")
	a := h.startWith(h.ctx, "ledger-A", func(cfg *Config) { cfg.Lease = ls.of("ledger-A") })
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error { // A's writer writes the status meanwhile
		acct := h.account()
		acct.Finalizers = []string{videogenv1alpha1.FinalizerLedger}
		return k8s.Update(h.ctx, acct)
	}))
	must(t, k8s.Delete(h.ctx, h.account()))
	a.accountEvent(h.ctx, h.account(), false)
	h.books(h.settle(a), 0, 0, 0)
	if err := a.Closable(h.ns); err != nil {
		t.Fatalf("A: an empty deleted account: %v; want closable", err)
	}

	ls.take("ledger-B")
	b := h.startWith(h.ctx, "ledger-B", func(cfg *Config) { cfg.Lease = ls.of("ledger-B") })
	// Since 3374951 (and, later, also one made after a deletion the books have not
	// seen yet) a credit to a closing account waits for the next account: B credits nothing, so
	// the interleaving above cannot be made any more, and A's closable is true of the account.
	pay := h.topUp("pay", "LATE-PAYMENT", 50)
	if _, err := b.ApplyTopUp(pay); !errors.Is(err, ErrAccountClosing) {
		t.Fatalf("B's credit to the closing account: %v, want ErrAccountClosing (it waits for the next account)", err)
	}
	h.booksClosed(h.settle(b), 0, 0, 0)
	if err := a.Closable(h.ns); err != nil && !errors.Is(err, ErrNotReady) {
		t.Fatalf("A: the closing account nobody credited: %v; want closable (or not ready: deposed)", err)
	}
	// Let the namespace's account go at the end (the test's cleanup).
	got := h.account()
	got.Finalizers = nil
	must(t, k8s.Update(h.ctx, got))
}

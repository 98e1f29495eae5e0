package ledger

import "testing"

// Found by the eighteenth adversarial review. Overdrawn is the one verdict of the books that
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

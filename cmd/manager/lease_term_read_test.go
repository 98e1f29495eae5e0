package main

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// term reads the Lease with lock.Get, and lock is the
// very LeaseLock the leader elector renews with (main passes it to controller-runtime as
// LeaderElectionResourceLockInterface). client-go's LeaseLock.Get stores the copy it read
// (ll.lease = lease), and LeaseLock.Update writes ll.lease back with the new record: the
// resourceVersion of the elector's compare-and-swap is whatever the last Get read, the ledger's
// included (and LeaseLock has no lock: a data race besides). So a ledger's read of the Lease
// hands the elector the current copy, and the elector's optimistic renewal (client-go's fast
// path: "update optimistically assuming that the record observed last time is the current
// version") lands over the manager elected meanwhile instead of failing with a conflict. The
// renewal writes the holder back with the transitions the elector observed last, i.e. the
// deposed manager's old term: its ledger's inTerm then says "held, in the term of my books",
// and it writes its stale books over the elected manager's accounts (credits and charges the
// other manager wrote are lost: each write carries absolute figures), while the other manager,
// finding the Lease taken, exits. Two managers, one after the other, each sure it is the only
// one, with no fence ordering them: exactly what the term was added to prevent.
//
// Interleaving (A the manager elected first, B the next):
//  1. A holds the Lease (transitions 0); its elector's last write left ll.lease at that copy.
//  2. A's elector, on its fast path (A is leader and its lease valid), is about to Update; A's
//     process is paused there past the lease duration (a frozen VM, CPU throttling, a long GC).
//  3. B's elector finds the lease expired and takes it (transitions 1); B's ledger fences the
//     accounts and runs.
//  4. A resumes. Its ledger, in a write's commit that found B's fence (or a build), reads the
//     Lease (term → lock.Get): not held, so that write steps down... but ll.lease is now B's copy.
//  5. A's elector, resumed in its fast path, Updates with ll.lease: the compare-and-swap holds
//     (it is the current resourceVersion), and the Lease says holder A, transitions 0 again.
//  6. A's ledger's next inTerm: held, transitions 0 = its books' term. B's: not held: B exits.
//
// Reachable: step 2 is the pause fencing exists for (client-go checks isLeaseValid and then
// Updates: a pause between the two is a pause like any other); step 4 needs the ledger's Lease
// read (which a resumed A makes as soon as it meets B's fence) to finish before the elector
// goroutine reads ll.lease for its Update: two goroutines resumed at once, either may be first.
//
// Suggested fix (words only): read the Lease for the term with a client of its own (the
// coordination client's Leases().Get, or a second LeaseLock used only for reading), never with
// the elector's LeaseLock, whose Get changes what its next Update compares against.
func TestReadingTheTermDoesNotLetTheElectorRenewOverTheManagerElectedMeanwhile(t *testing.T) {
	preferPagedLists()
	env, cfg, _, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := leaderLock(cfg, "default") // A's lock: its elector's and its ledger's (term)
	if err != nil {
		t.Fatal(err)
	}
	b, err := leaderLock(cfg, "default")
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Now())
	record := func(holder string, transitions int) resourcelock.LeaderElectionRecord {
		return resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 15,
			AcquireTime: now, RenewTime: now, LeaderTransitions: transitions}
	}
	// 1. A acquires the Lease; its ledger fixes its term.
	if err := a.lock.Create(ctx, record(a.lock.Identity(), 0)); err != nil {
		t.Fatal(err)
	}
	first, err := a.term(ctx)
	if err != nil || !first.Held {
		t.Fatalf("A's term: %+v %v, want held", first, err)
	}
	// A's elector renews once more (fast path), as it does every retry period.
	if err := a.lock.Update(ctx, record(a.lock.Identity(), 0)); err != nil {
		t.Fatal(err)
	}
	// 2-3. A is paused before its next renewal; B's elector takes the expired lease (slow path:
	// Get, then Update, one more transition).
	if _, _, err := b.lock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.lock.Update(ctx, record(b.lock.Identity(), int(first.Transitions)+1)); err != nil {
		t.Fatal(err)
	}
	// 4. A resumes: its ledger reads the Lease (it meets B's fence) and finds it lost.
	if got, err := a.term(ctx); err != nil || got.Held {
		t.Fatalf("A's term after B took the Lease: %+v %v, want not held", got, err)
	}
	// 5. A's elector finishes its fast-path renewal with the record it observed last.
	err = a.lock.Update(ctx, record(a.lock.Identity(), int(first.Transitions)))
	if err == nil {
		got, _ := a.term(ctx)
		holder, _, _ := b.lock.Get(ctx)
		t.Fatalf("A's elector renewed over B's acquisition (its compare-and-swap used the copy its ledger read): "+
			"the Lease names %q with transitions %d, and A's ledger reads %+v: held in the term of its books (%d), "+
			"so it writes its stale books over B's fences", holder.HolderIdentity, holder.LeaderTransitions, got, first.Transitions)
	}
	if !apierrors.IsConflict(err) {
		t.Fatalf("A's stale renewal: %v, want a conflict", err)
	}
}

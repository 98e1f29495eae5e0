package main

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// The ledger orders fences by the Lease: term says held while this manager's lock holds it, not
// held once another manager's does, and held in another term once it takes it back, read from
// the kube-apiserver each time.
func TestTermReadsTheLeaseHolderAndItsTerm(t *testing.T) {
	preferPagedLists() // as main does before any client is made (client-go reads it once)
	env, cfg, _, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mine, err := leaderLock(cfg, "default")
	if err != nil {
		t.Fatal(err)
	}
	other, err := leaderLock(cfg, "default")
	if err != nil {
		t.Fatal(err)
	}
	if mine.lock.Identity() == other.lock.Identity() {
		t.Fatal("two managers share an identity")
	}
	now := metav1.NewTime(time.Now())
	record := func(holder string) resourcelock.LeaderElectionRecord {
		return resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}
	}
	if err := mine.lock.Create(ctx, record(mine.lock.Identity())); err != nil {
		t.Fatal(err)
	}
	first, err := mine.term(ctx)
	if err != nil || !first.Held {
		t.Fatalf("the term while this manager holds the Lease: %+v %v, want held", first, err)
	}
	// Another manager takes the Lease (this one paused past it).
	if _, _, err := other.lock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	taken := record(other.lock.Identity())
	taken.LeaderTransitions = 1
	if err := other.lock.Update(ctx, taken); err != nil {
		t.Fatal(err)
	}
	if got, err := mine.term(ctx); err != nil || got.Held {
		t.Fatalf("the term after another manager took the Lease: %+v %v, want not held", got, err)
	}
	// This manager takes it back: held again, in another term.
	if _, _, err := mine.lock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	back := record(mine.lock.Identity())
	back.LeaderTransitions = 2
	if err := mine.lock.Update(ctx, back); err != nil {
		t.Fatal(err)
	}
	if got, err := mine.term(ctx); err != nil || !got.Held || got.Transitions == first.Transitions {
		t.Fatalf("the term after this manager took the Lease back: %+v %v, want held in a term other than %d", got, err, first.Transitions)
	}
}

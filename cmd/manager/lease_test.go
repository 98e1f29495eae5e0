package main

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// The ledger orders fences by the Lease: holds says true while this manager's lock holds it,
// and false once another manager's does, read from the kube-apiserver each time.
func TestHoldsReadsTheLeaseHolder(t *testing.T) {
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
	if mine.Identity() == other.Identity() {
		t.Fatal("two managers share an identity")
	}
	now := metav1.NewTime(time.Now())
	record := func(holder string) resourcelock.LeaderElectionRecord {
		return resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}
	}
	if err := mine.Create(ctx, record(mine.Identity())); err != nil {
		t.Fatal(err)
	}
	if got, err := holds(mine)(ctx); err != nil || !got {
		t.Fatalf("holds while this manager holds the Lease: %v %v, want true", got, err)
	}
	// Another manager takes the Lease (this one paused past it).
	if _, _, err := other.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.Update(ctx, record(other.Identity())); err != nil {
		t.Fatal(err)
	}
	if got, err := holds(mine)(ctx); err != nil || got {
		t.Fatalf("holds after another manager took the Lease: %v %v, want false", got, err)
	}
}

package jobs

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// Found by a tenant's tour: one account's stages whose inputs trickled in (a host that answers a
// byte every 2 s, held to the 2-minute fetch timeout) took both of the reference worker's slots,
// and another account's 8-second task waited 4 minutes behind them; 100 of its tasks filled the
// whole queue, and every other account's stages were answered busy until they timed out.
// The fetcher now cuts such a source after 20 s (fetcher.DefaultMinRate); a stage that is slow
// for any other reason still holds its slot as long, hence the fairness checked here.

// A freed slot goes to the account holding the fewest, not to the next stage in line: with one
// slot, account a's second and third stages queued before b's first, b's runs right after a's
// first, then a's.
func TestAFreedSlotGoesToTheAccountThatHoldsTheFewest(t *testing.T) {
	tbl := New(context.Background(), Config{MaxConcurrent: 1, MaxQueued: 8, TTL: time.Hour})
	var mu sync.Mutex
	var order []string
	gates := map[string]chan struct{}{}
	start := func(owner, key string) {
		gate := make(chan struct{})
		gates[key] = gate
		if _, _, err := tbl.StartFor(owner, key, time.Time{}, func(context.Context, Report) (Outcome, error) {
			mu.Lock()
			order = append(order, key)
			mu.Unlock()
			<-gate
			return Outcome{}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	started := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			got := len(order)
			mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d stages started, want %d", got, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	start("a", "a1")
	started(1)
	start("a", "a2")
	start("a", "a3")
	start("b", "b1")
	close(gates["a1"])
	started(2)
	close(gates["b1"])
	started(3)
	close(gates["a2"])
	started(4)
	close(gates["a3"])
	tbl.Wait()
	want := []string{"a1", "b1", "a2", "a3"}
	if len(order) != len(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("stages ran in the order %v, want %v (the first in line, a2, before b1: FIFO)", order, want)
		}
	}
}

// One account may have MaxPerOwner stages running or waiting; its next is busy, another
// account's is taken, and the first account's is taken again once one of its stages ended.
func TestAnAccountMayHoldOnlyItsShareOfTheTable(t *testing.T) {
	tbl := New(context.Background(), Config{MaxConcurrent: 1, MaxQueued: 8, MaxPerOwner: 2, TTL: time.Hour})
	release := make(chan struct{})
	block := func(context.Context, Report) (Outcome, error) { <-release; return Outcome{}, nil }
	first, _, _ := tbl.StartFor("a", "a1", time.Time{}, block)
	if _, _, err := tbl.StartFor("a", "a2", time.Time{}, block); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tbl.StartFor("a", "a3", time.Time{}, block); !errors.Is(err, ErrBusy) {
		t.Fatalf("a third stage of an account allowed 2: err = %v, want ErrBusy", err)
	}
	if _, _, err := tbl.StartFor("b", "b1", time.Time{}, block); err != nil {
		t.Fatalf("another account's stage: %v", err)
	}
	// The stage already known by its key is answered, whatever the bound.
	if st, created, err := tbl.StartFor("a", "a1", time.Time{}, block); err != nil || created || st.ID != first.ID {
		t.Errorf("a resubmission of a1: %+v, created %v, %v", st, created, err)
	}
	tbl.Cancel(first.ID)
	if _, _, err := tbl.StartFor("a", "a3", time.Time{}, block); err != nil {
		t.Errorf("a's stage after one of its two ended: %v", err)
	}
	close(release)
	tbl.Wait()
}

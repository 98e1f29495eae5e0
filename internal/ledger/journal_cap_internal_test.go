package ledger

import (
	"fmt"
	"strings"
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// The journal cap (c97761b): plan() measures the
// room left in a write by the whole journal of the account as last written, including the
// entries this very write forgets, and lets an entry past the cap through only when that
// journal is empty. A charge whose entry is larger than the cap less one small entry (a task
// whose result carries a large metadata map: TaskResult has no size bound, and a task's status
// may be up to etcd's 1.5 MiB) then waits for a write whose base journal is empty. On an
// account with a steady trickle of tasks there is none: every write forgets the previous small
// charge (its task now says Deducted) and adds the next one, so the journal it starts from is
// never empty. The large charge is starved for as long as the account is busy.
//
// The interleaving, one write interval per step:
//  1. Task s0 (REST create, held) succeeds: its charge lands; it is Charged, its entry in the
//     journal (the controller writes Deducted a reconcile later).
//  2. Task big succeeds with a result of ~520 KiB: Charge queues its entry. s0 ends Succeeded,
//     Deducted, closed; s1 succeeds: Charge queues its entry.
//  3. The write: base journal = [s0] (a few hundred bytes) + big (> 512 KiB - that) does not
//     fit, so big is skipped; s0 is forgotten, s1 added. Journal = [s1].
//  4. Repeat with s1 ended and s2 charged, ... : each write starts from a journal of one entry.
//
// Reachable: each step is the VideoTask controller's ordinary Charge / Deducted-close path, one
// task per second on one account (a modest load for a batch customer); the large result comes
// from the backend (Metadata map[string]string, unvalidated). What a user sees: task big stays
// Charging ("waiting for the account's write") for as long as the account is busy: its hold
// never ends, it never reaches Succeeded, the customer never gets its result, and the account
// (if deleted) cannot go (Closable wants nothing queued).
//
// Suggested fix: measure the room by the entries the write keeps (fate unknown), not the whole
// base journal; and let an entry past the cap through when the kept journal is empty, or give
// the oldest queued entry precedence (write it alone once it has waited a write) instead of
// visiting the queue by UID.
func TestALargeChargeIsNotStarvedByASteadyTrickleOfSmallOnes(t *testing.T) {
	const price, rounds = int64(10), 6
	h := newHarness(t, 1000)
	s := h.stepped("ledger-2", nil)
	b := s.l.book(h.ns)
	state := func(name string) state {
		b.mu.Lock()
		defer b.mu.Unlock()
		if e := b.tasks[name]; e != nil {
			return e.state
		}
		return settled
	}
	small := func(i int) *videogenv1alpha1.VideoTask {
		task := h.create(s.l, fmt.Sprintf("s%d", i), price)
		s.chargeQueued(task)
		return task
	}
	prev := small(0)
	if !s.stepUntil(func() bool { return state(prev.Name) == charged }) {
		t.Fatal("s0's charge did not land")
	}

	big := h.create(s.l, "big", price)
	result := &videogenv1alpha1.TaskResult{URL: "https://media.example/out/big.mp4", MediaType: "video/mp4",
		Metadata: map[string]string{"frames": strings.Repeat("f", 520<<10)}}
	if done, err := s.l.Charge(big, result); done || err != nil {
		t.Fatalf("Charge(big): %v %v, want it queued", done, err)
	}
	for i := 1; i <= rounds; i++ {
		// The controller ends the previous small task Succeeded, Deducted, closed; the next one
		// succeeds.
		cost := price
		h.writeStatus(s.l, prev, func(st *videogenv1alpha1.VideoTaskStatus) {
			st.Phase, st.Charge, st.Cost, st.Closed = videogenv1alpha1.TaskSucceeded, videogenv1alpha1.ChargeDeducted, &cost, true
		})
		prev = small(i)
		// (Fixed: the first write with room takes big, and the small charges after it wait.)
		if !s.stepUntil(func() bool { return state(prev.Name) == charged || state(big.Name) == charged }) {
			t.Fatalf("round %d: neither %s's charge nor big's landed", i, prev.Name)
		}
		if state(big.Name) == charged {
			t.Logf("big's charge landed in round %d", i)
			return
		}
	}
	a := h.account()
	t.Fatalf("after %d writes big is still %s (journal %d entries, %d queued): its charge is starved by the "+
		"small charge each write forgets and the next it adds; frozen %d holds %d",
		rounds, state(big.Name), len(a.Status.Journal), func() int { b.mu.Lock(); defer b.mu.Unlock(); return len(b.queued) }(),
		a.Status.Frozen, a.Status.Holds)
}

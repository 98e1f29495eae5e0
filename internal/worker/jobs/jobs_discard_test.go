package jobs

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// A stage whose work returns a result after a
// cancel ended it has that result discarded (Outcome.Discard, which deletes the stored blob),
// and a result the table records is never discarded. The cancel is forced between the work's
// last step and its return.
func TestADroppedResultIsDiscardedAndAKeptOneIsNot(t *testing.T) {
	tbl := New(context.Background(), Config{MaxConcurrent: 2, TTL: time.Hour})
	var dropped, kept atomic.Int32
	storing, release := make(chan struct{}), make(chan struct{})
	cancelled, _, _ := tbl.Start("cancelled", func(ctx context.Context, _ Report) (Outcome, error) {
		close(storing)
		<-release // the blob is stored; the cancel comes before the work returns
		return Outcome{Discard: func() { dropped.Add(1) }}, nil
	})
	<-storing
	tbl.Cancel(cancelled.ID)
	close(release)
	done, _, _ := tbl.Start("done", func(ctx context.Context, _ Report) (Outcome, error) {
		return Outcome{Discard: func() { kept.Add(1) }}, nil
	})
	tbl.Wait()
	if dropped.Load() != 1 {
		t.Errorf("the cancelled stage's result was discarded %d times, want 1", dropped.Load())
	}
	if st, _ := tbl.Get(done.ID); st.State != "succeeded" || kept.Load() != 0 {
		t.Errorf("the recorded stage: %+v, discarded %d times, want succeeded and 0", st, kept.Load())
	}
}

// Checked, holds: a stage that ends between the controller's poll (which
// saw it running) and its cancel (the task timed out, or its owner cancelled it) stays
// succeeded, with its result, and the result is not discarded. It must not be: a status write
// that landed but reported an error can leave the controller with a stale copy that still
// says Running and cancels a stage whose result the task's status already carries; deleting
// the blob then would take a paid video away. (The result of a task that really ended
// cancelled is left to the blob store's own lifetime.)
func TestACancelAfterTheStageSucceededKeepsItsResult(t *testing.T) {
	tbl := New(context.Background(), Config{MaxConcurrent: 1, TTL: time.Hour})
	var discarded atomic.Int32
	st, _, _ := tbl.Start("k", func(ctx context.Context, _ Report) (Outcome, error) {
		return Outcome{Discard: func() { discarded.Add(1) }}, nil
	})
	tbl.Wait() // it succeeded after the poll that saw it running
	if !tbl.Cancel(st.ID) || !tbl.CancelKey("k") {
		t.Fatal("the table forgot a stage before its TTL")
	}
	if got, _ := tbl.Get(st.ID); got.State != "succeeded" || got.Progress != 100 || discarded.Load() != 0 {
		t.Errorf("after the cancels: %+v, discarded %d times; want succeeded and kept", got, discarded.Load())
	}
}

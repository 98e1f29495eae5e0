package jobs

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Adversarial round 21, finding (1) at the table: a stage whose work returns a result after a
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

package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
)

// A caller that submitted a stage and never learned its id (the answer, or the status write
// recording it, was lost) stops it by the key it submitted with: the work sees its context end,
// the stage reads failed "cancelled", and its slot is free again.
func TestCancelKeyStopsTheStageSubmittedUnderTheKey(t *testing.T) {
	tbl := New(context.Background(), Config{MaxConcurrent: 1, MaxQueued: 1, TTL: time.Hour})
	started := make(chan struct{})
	st, _, _ := tbl.Start("acme/t/uid/render", func(ctx context.Context, _ Report) (Outcome, error) {
		close(started)
		<-ctx.Done()
		return Outcome{}, ctx.Err()
	})
	<-started
	if tbl.CancelKey("acme/t/uid/analyze") {
		t.Error("CancelKey knew a key nothing was submitted under")
	}
	if !tbl.CancelKey("acme/t/uid/render") {
		t.Fatal("CancelKey did not know the stage's key")
	}
	tbl.Wait() // returns only if the work saw its context end
	if got := waitFor(t, tbl, st.ID, protocol.StateFailed); got.Message != "cancelled" {
		t.Errorf("message = %q, want cancelled", got.Message)
	}
	// Cancelling it again, ended, changes nothing.
	if !tbl.CancelKey("acme/t/uid/render") {
		t.Error("CancelKey forgot an ended stage before its TTL")
	}
	if got, _ := tbl.Get(st.ID); got.State != protocol.StateFailed || got.Message != "cancelled" {
		t.Errorf("after a second cancel: %+v", got)
	}
}

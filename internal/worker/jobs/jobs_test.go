package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
)

func waitFor(t *testing.T, tbl *Table, id, state string) protocol.StageStatus {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if st, ok := tbl.Get(id); ok && st.State == state {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
	st, _ := tbl.Get(id)
	t.Fatalf("stage %s is %+v, want %s", id, st, state)
	return st
}

func TestTheSameKeyStartsTheWorkOnce(t *testing.T) {
	tbl := New(context.Background(), Config{MaxConcurrent: 2, MaxQueued: 2, TTL: time.Hour})
	var runs atomic.Int32
	fn := func(context.Context, Report) (Outcome, error) {
		runs.Add(1)
		return Outcome{Outputs: map[string]string{"k": "v"}}, nil
	}
	first, created1, _ := tbl.Start("key-1", fn)
	second, created2, _ := tbl.Start("key-1", fn)
	if first.ID != second.ID || !created1 || created2 {
		t.Fatalf("ids %s/%s created %v/%v, want one stage", first.ID, second.ID, created1, created2)
	}
	st := waitFor(t, tbl, first.ID, protocol.StateSucceeded)
	tbl.Wait()
	if runs.Load() != 1 || st.Outputs["k"] != "v" || st.Progress != 100 {
		t.Errorf("runs = %d, status = %+v", runs.Load(), st)
	}
}

func TestStagesBeyondTheConcurrencyBoundWait(t *testing.T) {
	tbl := New(context.Background(), Config{MaxConcurrent: 1, MaxQueued: 1, TTL: time.Hour})
	release := make(chan struct{})
	var running, peak atomic.Int32
	first := make(chan struct{}, 2)
	fn := func(ctx context.Context, report Report) (Outcome, error) {
		n := running.Add(1)
		peak.Store(max(peak.Load(), n))
		report(50, "halfway")
		first <- struct{}{}
		<-release
		running.Add(-1)
		return Outcome{}, nil
	}
	a, _, _ := tbl.Start("a", fn)
	<-first
	b, _, _ := tbl.Start("b", fn)
	if _, _, err := tbl.Start("c", fn); !errors.Is(err, ErrBusy) {
		t.Errorf("third stage: err = %v, want ErrBusy", err)
	}
	time.Sleep(50 * time.Millisecond)
	if st, _ := tbl.Get(b.ID); st.Message != "queued" {
		t.Errorf("second stage = %+v, want queued", st)
	}
	if st, _ := tbl.Get(a.ID); st.Progress != 50 || st.Message != "halfway" {
		t.Errorf("first stage = %+v, want its progress report", st)
	}
	close(release)
	waitFor(t, tbl, b.ID, protocol.StateSucceeded)
	if peak.Load() != 1 {
		t.Errorf("peak concurrency = %d, want 1", peak.Load())
	}
}

func TestCancelStopsTheWorkAndTheStageReadsFailed(t *testing.T) {
	tbl := New(context.Background(), Config{MaxConcurrent: 1, TTL: time.Hour})
	started := make(chan struct{})
	st, _, _ := tbl.Start("k", func(ctx context.Context, _ Report) (Outcome, error) {
		close(started)
		<-ctx.Done()
		return Outcome{}, ctx.Err()
	})
	<-started
	if !tbl.Cancel(st.ID) {
		t.Fatal("Cancel did not know the stage")
	}
	tbl.Wait() // returns only if the work saw its context end
	if got := waitFor(t, tbl, st.ID, protocol.StateFailed); got.Message != "cancelled" {
		t.Errorf("message = %q", got.Message)
	}
	if tbl.Cancel("stg_unknown") {
		t.Error("Cancel knew an unknown stage")
	}
}

func TestCancelBeforeTheStageGetsASlot(t *testing.T) {
	tbl := New(context.Background(), Config{MaxConcurrent: 1, MaxQueued: 1, TTL: time.Hour})
	release := make(chan struct{})
	busy := make(chan struct{})
	tbl.Start("busy", func(context.Context, Report) (Outcome, error) { close(busy); <-release; return Outcome{}, nil })
	<-busy
	var ran atomic.Bool
	queued, _, _ := tbl.Start("queued", func(context.Context, Report) (Outcome, error) { ran.Store(true); return Outcome{}, nil })
	tbl.Cancel(queued.ID)
	close(release)
	tbl.Wait()
	if st, _ := tbl.Get(queued.ID); st.State != protocol.StateFailed || ran.Load() {
		t.Errorf("cancelled queued stage = %+v, ran = %v", st, ran.Load())
	}
}

func TestFailuresAndPanicsFailOnlyTheirStage(t *testing.T) {
	tbl := New(context.Background(), Config{MaxConcurrent: 1, MaxQueued: 1, TTL: time.Hour})
	a, _, _ := tbl.Start("a", func(context.Context, Report) (Outcome, error) {
		return Outcome{}, errors.New("no face found in the face image")
	})
	b, _, _ := tbl.Start("b", func(context.Context, Report) (Outcome, error) { panic("boom") })
	if st := waitFor(t, tbl, a.ID, protocol.StateFailed); st.Message != "no face found in the face image" {
		t.Errorf("message = %q", st.Message)
	}
	if st := waitFor(t, tbl, b.ID, protocol.StateFailed); st.Message != "internal error: boom" {
		t.Errorf("message = %q", st.Message)
	}
}

func TestFinishedStagesAreForgottenAfterTheTTL(t *testing.T) {
	tbl := New(context.Background(), Config{MaxConcurrent: 1, TTL: time.Minute})
	now := time.Now()
	tbl.now = func() time.Time { return now }
	st, _, _ := tbl.Start("k", func(context.Context, Report) (Outcome, error) { return Outcome{}, nil })
	waitFor(t, tbl, st.ID, protocol.StateSucceeded)

	now = now.Add(2 * time.Minute)
	if _, ok := tbl.Get(st.ID); ok {
		t.Fatal("stage still known after its TTL")
	}
	again, created, _ := tbl.Start("k", func(context.Context, Report) (Outcome, error) { return Outcome{}, nil })
	if !created || again.ID == st.ID {
		t.Errorf("a key forgotten after the TTL should start a new stage")
	}
}

type detailedError struct{}

func (detailedError) Error() string  { return "could not resolve host example.com" }
func (detailedError) Detail() string { return "lookup example.com on 10.255.255.53:53: no such host" }

// A failed stage's message is shown to callers; the log line keeps what the message leaves out.
func TestAFailedStageIsLoggedWithItsDetail(t *testing.T) {
	var logged bytes.Buffer
	tbl := New(context.Background(), Config{MaxConcurrent: 1, TTL: time.Hour, Log: slog.New(slog.NewTextHandler(&logged, nil))})
	st, _, _ := tbl.Start("key-1", func(context.Context, Report) (Outcome, error) {
		return Outcome{}, fmt.Errorf("the face image could not be fetched: %w", detailedError{})
	})
	failed := waitFor(t, tbl, st.ID, protocol.StateFailed)
	tbl.Wait()
	if strings.Contains(failed.Message, "10.255.255.53") {
		t.Errorf("the stage's message %q shows the detail", failed.Message)
	}
	if !strings.Contains(logged.String(), "10.255.255.53:53") || !strings.Contains(logged.String(), "stage failed") {
		t.Errorf("log = %q, want the failure with its detail", logged.String())
	}
}

// blockUntilStopped is a stage that runs until its context ends, and says when it started.
func blockUntilStopped(started chan<- string, name string) Func {
	return func(ctx context.Context, _ Report) (Outcome, error) {
		started <- name
		<-ctx.Done()
		return Outcome{}, ctx.Err()
	}
}

func TestAStageIsStoppedAtItsDeadlineAndFreesItsSlot(t *testing.T) {
	tbl := New(context.Background(), Config{MaxConcurrent: 1, MaxQueued: 1, TTL: time.Hour})
	started := make(chan string, 2)
	late, _, _ := tbl.StartBy("late", time.Now().Add(200*time.Millisecond), blockUntilStopped(started, "late"))
	if <-started != "late" {
		t.Fatal("the first stage did not start first")
	}
	next, _, _ := tbl.StartBy("next", time.Now().Add(time.Minute), blockUntilStopped(started, "next"))
	if got := waitFor(t, tbl, late.ID, protocol.StateFailed); got.Message != PastDeadline {
		t.Errorf("message = %q, want %q", got.Message, PastDeadline)
	}
	select {
	case <-started: // the slot went to the next stage
	case <-time.After(5 * time.Second):
		st, _ := tbl.Get(next.ID)
		t.Fatalf("the next stage never got the slot: %+v", st)
	}
	tbl.Cancel(next.ID)
	tbl.Wait()
}

func TestAStageQueuedPastItsDeadlineNeverRuns(t *testing.T) {
	tbl := New(context.Background(), Config{MaxConcurrent: 1, MaxQueued: 1, TTL: time.Hour})
	started := make(chan string, 2)
	busy, _, _ := tbl.Start("busy", blockUntilStopped(started, "busy"))
	<-started
	queued, _, _ := tbl.StartBy("queued", time.Now().Add(100*time.Millisecond), blockUntilStopped(started, "queued"))
	if got := waitFor(t, tbl, queued.ID, protocol.StateFailed); got.Message != PastDeadline+" before it started" {
		t.Errorf("message = %q", got.Message)
	}
	tbl.Cancel(busy.ID)
	tbl.Wait()
	if len(started) != 0 {
		t.Errorf("the stage queued past its deadline ran")
	}
}

// A deadline already past at submission ends the stage at once, without a slot; the stage is
// kept, so submitting its key again finds it instead of refusing or starting it.
func TestAStageSubmittedPastItsDeadlineEndsAtOnce(t *testing.T) {
	tbl := New(context.Background(), Config{MaxConcurrent: 1, MaxQueued: 0, TTL: time.Hour})
	started := make(chan string, 2)
	busy, _, _ := tbl.Start("busy", blockUntilStopped(started, "busy"))
	<-started
	past := time.Now().Add(-time.Second)
	st, created, err := tbl.StartBy("past", past, blockUntilStopped(started, "past"))
	if err != nil || !created || st.State != protocol.StateFailed || st.Message != PastDeadline+" before it started" {
		t.Fatalf("StartBy past its deadline = %+v, created %v, err %v", st, created, err)
	}
	again, created, err := tbl.StartBy("past", past, blockUntilStopped(started, "past"))
	if err != nil || created || again.ID != st.ID {
		t.Errorf("resubmission = %+v, created %v, err %v; want the same stage", again, created, err)
	}
	tbl.Cancel(busy.ID)
	tbl.Wait()
	if len(started) != 0 {
		t.Errorf("the stage submitted past its deadline ran")
	}
}

// Without a deadline a stage runs until it ends or is cancelled, as before deadlines existed.
func TestAStageWithoutADeadlineRunsUntilCancelled(t *testing.T) {
	tbl := New(context.Background(), Config{MaxConcurrent: 1, TTL: time.Hour})
	started := make(chan string, 1)
	st, _, _ := tbl.StartBy("k", time.Time{}, blockUntilStopped(started, "k"))
	<-started
	time.Sleep(100 * time.Millisecond)
	if got, _ := tbl.Get(st.ID); got.State != protocol.StateRunning {
		t.Fatalf("a stage without a deadline = %+v, want running", got)
	}
	tbl.Cancel(st.ID)
	tbl.Wait()
	if got := waitFor(t, tbl, st.ID, protocol.StateFailed); got.Message != "cancelled" {
		t.Errorf("message = %q", got.Message)
	}
}

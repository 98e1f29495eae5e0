// Package jobs runs a worker's stages in the background: each stage is started once per
// idempotency key, runs in its own goroutine under a bound on concurrency, reports progress,
// can be cancelled, is stopped at its deadline, and is forgotten a while after it ended.
package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
)

// Outcome is what a finished stage produced.
type Outcome struct {
	Outputs map[string]string
	Result  *protocol.Result
	// Discard, if set, undoes what the stage stored (its result blob) when the table drops the
	// outcome: the stage was cancelled, passed its deadline, or the worker stopped while the
	// stage finished, so no caller will ever read the result.
	Discard func()
}

func (o Outcome) discard() {
	if o.Discard != nil {
		o.Discard()
	}
}

// Report tells the table how far a stage got.
type Report func(progress int, message string)

// Func does one stage's work; ctx ends when the stage is cancelled, passes its deadline, or the
// worker stops.
type Func func(ctx context.Context, report Report) (Outcome, error)

// Config bounds the table.
type Config struct {
	// MaxConcurrent stages run at once (at least 1).
	MaxConcurrent int
	// MaxQueued stages may wait for a slot; beyond that Start returns ErrBusy.
	MaxQueued int
	// MaxPerOwner bounds the unfinished stages (running and waiting) of one owner, the task's
	// account (0: no bound but the table's): beyond it StartFor returns ErrBusy to that owner
	// only, so that one account's stages cannot fill the table for every other.
	MaxPerOwner int
	// TTL is how long a finished stage's status is kept.
	TTL time.Duration
	// Log receives a line per failed stage, with the detail its message leaves out (nil: none).
	Log *slog.Logger
}

// ErrBusy: too many stages are waiting; the caller should retry later.
var ErrBusy = errors.New("too many stages are waiting; retry later")

// Table holds every stage the worker knows.
type Table struct {
	cfg  Config
	root context.Context
	now  func() time.Time
	wg   sync.WaitGroup

	mu    sync.Mutex
	byID  map[string]*job
	byKey map[string]*job
	// The slots: free ones, the stages waiting for one in arrival order, and per owner the
	// stages holding one and when it was last given one (a count of grants).
	free      int
	waiting   []*job
	running   map[string]int
	lastGrant map[string]uint64
	grants    uint64
}

type job struct {
	status   protocol.StageStatus
	owner    string
	cancel   context.CancelFunc
	finished time.Time     // zero while the stage runs
	ready    chan struct{} // closed when the stage is given a slot
	granted  bool
}

// New returns a table whose stages all stop when root ends.
func New(root context.Context, cfg Config) *Table {
	cfg.MaxConcurrent = max(cfg.MaxConcurrent, 1)
	cfg.MaxQueued = max(cfg.MaxQueued, 0)
	return &Table{cfg: cfg, root: root, now: time.Now, free: cfg.MaxConcurrent,
		byID: map[string]*job{}, byKey: map[string]*job{}, running: map[string]int{}, lastGrant: map[string]uint64{}}
}

// Start runs fn for key unless a stage with that key is already known, in which case that
// stage's status is returned and created is false.
func (t *Table) Start(key string, fn Func) (st protocol.StageStatus, created bool, err error) {
	return t.StartBy(key, time.Time{}, fn)
}

// StartBy is Start for a stage that must end by deadline (zero: none): its context ends then,
// and it reads failed with PastDeadline. A stage whose deadline has already passed is created
// failed at once and never runs, so a resubmission still finds it by key.
func (t *Table) StartBy(key string, deadline time.Time, fn Func) (st protocol.StageStatus, created bool, err error) {
	return t.StartFor("", key, deadline, fn)
}

// StartFor is StartBy for a stage of owner (the task's account; "" for none): its stages are
// bounded by MaxPerOwner, and a free slot goes to the waiting stage whose owner holds the fewest
// slots, of those the owner given one longest ago, so that one account's queue does not keep
// another's stages waiting behind it.
func (t *Table) StartFor(owner, key string, deadline time.Time, fn Func) (st protocol.StageStatus, created bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweepLocked()
	if j, ok := t.byKey[key]; ok {
		return j.status, false, nil
	}
	status := protocol.StageStatus{ID: newID(), Key: key, State: protocol.StateRunning, Message: "queued"}
	if !deadline.IsZero() && !t.now().Before(deadline) {
		// It takes no slot, so it is never refused as busy.
		j := &job{cancel: func() {}, status: status}
		t.byID[j.status.ID], t.byKey[key] = j, j
		t.finishLocked(j, protocol.StateFailed, PastDeadline+" before it started", Outcome{})
		return j.status, true, nil
	}
	if t.unfinishedLocked("") >= t.cfg.MaxConcurrent+t.cfg.MaxQueued {
		return protocol.StageStatus{}, false, ErrBusy
	}
	if t.cfg.MaxPerOwner > 0 && owner != "" && t.unfinishedLocked(owner) >= t.cfg.MaxPerOwner {
		return protocol.StageStatus{}, false, fmt.Errorf("%w: %d stages of this account run or wait, the most one account may have", ErrBusy, t.cfg.MaxPerOwner)
	}
	ctx, cancel := stageContext(t.root, deadline)
	j := &job{cancel: cancel, status: status, owner: owner, ready: make(chan struct{})}
	t.byID[j.status.ID], t.byKey[key] = j, j
	t.waiting = append(t.waiting, j)
	t.grantLocked()
	t.wg.Add(1)
	go t.run(ctx, j, fn)
	return j.status, true, nil
}

// stageContext ends with root, at the stage's cancel, and at its deadline (zero: none).
func stageContext(root context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if deadline.IsZero() {
		return context.WithCancel(root)
	}
	return context.WithDeadline(root, deadline)
}

// PastDeadline is the message of a stage its deadline stopped.
const PastDeadline = "the stage passed its deadline"

// Get returns a stage's status.
func (t *Table) Get(id string) (protocol.StageStatus, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweepLocked()
	j, ok := t.byID[id]
	if !ok {
		return protocol.StageStatus{}, false
	}
	return j.status, true
}

// Cancel stops a running stage, which then reads as failed. It reports whether id was known.
func (t *Table) Cancel(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	j, ok := t.byID[id]
	if ok {
		t.cancelLocked(j)
	}
	return ok
}

// CancelKey is Cancel for the stage submitted under key, for a caller that never learned its
// id. It reports whether key was known.
func (t *Table) CancelKey(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	j, ok := t.byKey[key]
	if ok {
		t.cancelLocked(j)
	}
	return ok
}

func (t *Table) cancelLocked(j *job) {
	if j.finished.IsZero() {
		j.cancel()
		t.finishLocked(j, protocol.StateFailed, "cancelled", Outcome{})
	}
}

// Wait blocks until every started stage's goroutine has returned.
func (t *Table) Wait() { t.wg.Wait() }

func (t *Table) run(ctx context.Context, j *job, fn Func) {
	defer t.wg.Done()
	defer j.cancel()
	select {
	case <-j.ready:
	case <-ctx.Done():
	}
	t.mu.Lock()
	if !j.granted {
		// Stopped while it waited: it leaves the queue without a slot.
		t.waiting = slices.DeleteFunc(t.waiting, func(w *job) bool { return w == j })
		t.mu.Unlock()
		t.finish(j, protocol.StateFailed, stopped(ctx)+" before it started", Outcome{})
		return
	}
	t.mu.Unlock()
	defer t.release(j)
	if ctx.Err() != nil { // given its slot as it was stopped
		t.finish(j, protocol.StateFailed, stopped(ctx)+" before it started", Outcome{})
		return
	}
	t.report(j, 0, "started")
	out, err := safely(ctx, fn, func(p int, msg string) { t.report(j, p, msg) })
	switch {
	case ctx.Err() != nil:
		t.finish(j, protocol.StateFailed, stopped(ctx), Outcome{})
		if err == nil {
			out.discard() // a result nobody will read
		}
	case err != nil:
		t.logFailure(j, err)
		t.finish(j, protocol.StateFailed, err.Error(), Outcome{})
	default:
		if !t.finish(j, protocol.StateSucceeded, "done", out) {
			out.discard() // a cancel ended the stage first
		}
	}
}

// stopped says why a stage's context ended: its deadline, or a cancel (the caller's, or the
// worker's stopping).
func stopped(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return PastDeadline
	}
	return "cancelled"
}

// logFailure logs a failed stage. Its message is shown to the task's caller, so parts of it
// (a fetch's DNS error) say less than the cause: an error with a Detail gives the whole cause.
func (t *Table) logFailure(j *job, err error) {
	if t.cfg.Log == nil {
		return
	}
	attrs := []any{"id", j.status.ID, "key", j.status.Key, "error", err.Error()}
	var detailed interface{ Detail() string }
	if errors.As(err, &detailed) {
		attrs = append(attrs, "detail", detailed.Detail())
	}
	t.cfg.Log.Warn("stage failed", attrs...)
}

// safely turns a panic in one stage into that stage's failure instead of the worker's crash.
func safely(ctx context.Context, fn Func, report Report) (out Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error: %v", r)
		}
	}()
	return fn(ctx, report)
}

func (t *Table) report(j *job, progress int, message string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if j.finished.IsZero() {
		j.status.Progress, j.status.Message = int32(min(max(progress, 0), 99)), message
	}
}

func (t *Table) finish(j *job, state, message string, out Outcome) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.finishLocked(j, state, message, out)
}

// finishLocked ends a stage once; whatever comes later (a result racing a cancel) is dropped,
// and it reports false.
func (t *Table) finishLocked(j *job, state, message string, out Outcome) bool {
	if !j.finished.IsZero() {
		return false
	}
	j.finished = t.now()
	j.status.State, j.status.Message = state, message
	if state == protocol.StateSucceeded {
		j.status.Progress, j.status.Outputs, j.status.Result = 100, out.Outputs, out.Result
	}
	return true
}

// grantLocked gives the free slots to waiting stages: each to the stage of the owner holding
// the fewest slots, among those the owner given one longest ago (never: first), the earliest
// to arrive of that owner's.
func (t *Table) grantLocked() {
	for t.free > 0 && len(t.waiting) > 0 {
		best := 0
		for i, j := range t.waiting[1:] {
			b := t.waiting[best]
			if r, rb := t.running[j.owner], t.running[b.owner]; r < rb || r == rb && t.lastGrant[j.owner] < t.lastGrant[b.owner] {
				best = i + 1
			}
		}
		j := t.waiting[best]
		t.waiting = slices.Delete(t.waiting, best, best+1)
		t.grants++
		t.free--
		t.running[j.owner]++
		t.lastGrant[j.owner] = t.grants
		j.granted = true
		close(j.ready)
	}
}

// release gives back j's slot, and forgets its owner once it holds and waits for none.
func (t *Table) release(j *job) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.free++
	if t.running[j.owner]--; t.running[j.owner] == 0 {
		delete(t.running, j.owner)
		if !slices.ContainsFunc(t.waiting, func(w *job) bool { return w.owner == j.owner }) {
			delete(t.lastGrant, j.owner)
		}
	}
	t.grantLocked()
}

// unfinishedLocked counts the stages running or waiting: owner's, or all ("").
func (t *Table) unfinishedLocked(owner string) int {
	n := 0
	for _, j := range t.byID {
		if j.finished.IsZero() && (owner == "" || j.owner == owner) {
			n++
		}
	}
	return n
}

func (t *Table) sweepLocked() {
	if t.cfg.TTL <= 0 {
		return
	}
	cutoff := t.now().Add(-t.cfg.TTL)
	for id, j := range t.byID {
		if !j.finished.IsZero() && j.finished.Before(cutoff) {
			delete(t.byID, id)
			delete(t.byKey, j.status.Key)
		}
	}
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "stg_" + hex.EncodeToString(b[:])
}

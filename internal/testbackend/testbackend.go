// Package testbackend is a generation backend for tests only: each test scripts what happens to
// each task. It is never wired into a shipped binary.
package testbackend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// Step is what the test backend does with one stage.
type Step int

const (
	Succeed Step = iota
	Fail
	Hang
	Refuse // Submit returns a permanent error
)

// Script is how the test backend treats one task, stage by stage, and how long each stage takes.
type Script struct {
	Analyze, Render Step
	Latency         time.Duration
	// CancelFails makes Cancel fail, as an unreachable backend does.
	CancelFails bool
}

// Backend is a generation.Backend whose outcomes each test controls, keyed by task name.
// It remembers submissions by work key like a real backend would, so it survives a manager
// restart and counts duplicate submissions.
type Backend struct {
	mu       sync.Mutex
	scripts  map[string]Script
	started  map[string]time.Time // by work key
	submits  map[string]int       // by work key
	canceled map[string]bool      // by work key
	deadline map[string]time.Time // by work key, as last submitted
	// restarts counts Restart calls; forgotten holds the handles they forgot.
	restarts  int
	forgotten map[string]bool
}

func New() *Backend {
	return &Backend{scripts: map[string]Script{}, started: map[string]time.Time{}, submits: map[string]int{}, canceled: map[string]bool{},
		deadline: map[string]time.Time{}, forgotten: map[string]bool{}}
}

// Restart forgets every stage, as the reference worker does when it restarts (it keeps them in
// memory): observing one of them says the stage was lost (generation.ErrStageLost), and a stage
// submitted again under its key starts over with a new handle.
func (b *Backend) Restart() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for key := range b.started {
		b.forgotten[b.handle(key)] = true
	}
	clear(b.started)
	b.restarts++
}

// handle is the handle of a stage key since the last restart.
func (b *Backend) handle(key string) string {
	if b.restarts == 0 {
		return "h-" + key
	}
	return fmt.Sprintf("h-%s~%d", key, b.restarts)
}

func (b *Backend) Set(task string, s Script) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.scripts[task] = s
}

func (b *Backend) stepFor(w generation.Work) (Step, time.Duration) {
	s := b.scripts[w.Task]
	if w.Stage == videogenv1alpha1.StageAnalyze {
		return s.Analyze, s.Latency
	}
	return s.Render, s.Latency
}

func (b *Backend) Submit(_ context.Context, w generation.Work) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st, _ := b.stepFor(w); st == Refuse {
		return "", generation.Permanent(errors.New("input refused by test backend"))
	}
	b.submits[w.Key]++
	b.deadline[w.Key] = w.Deadline
	if _, ok := b.started[w.Key]; !ok {
		b.started[w.Key] = time.Now()
	}
	return b.handle(w.Key), nil
}

func (b *Backend) Observe(_ context.Context, w generation.Work, handle string) (generation.Observation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.forgotten[handle] {
		return generation.Observation{}, generation.Lost(fmt.Errorf("test backend restarted: stage %q unknown", handle))
	}
	if handle != b.handle(w.Key) {
		return generation.Observation{}, generation.Permanent(fmt.Errorf("unknown handle %q", handle))
	}
	st, latency := b.stepFor(w)
	if st == Hang || time.Since(b.started[w.Key]) < latency {
		return generation.Observation{State: generation.Running, Progress: 50}, nil
	}
	if st == Fail {
		return generation.Observation{State: generation.Failed, Message: "scripted failure"}, nil
	}
	obs := generation.Observation{State: generation.Succeeded, Progress: 100}
	if w.Stage == videogenv1alpha1.StageAnalyze {
		obs.Outputs = map[string]string{"faces": "1"}
	} else {
		obs.Result = &videogenv1alpha1.TaskResult{URL: ResultURL(w.Task), MediaType: "video/mp4",
			Metadata: map[string]string{"analyzedFaces": w.Previous["faces"]}}
	}
	return obs, nil
}

func (b *Backend) Cancel(_ context.Context, w generation.Work, _ string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.scripts[w.Task].CancelFails {
		return errors.New("test backend: unreachable")
	}
	b.canceled[w.Key] = true
	return nil
}

func (b *Backend) WasCanceled(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.canceled[key]
}

// ResultURL is the result URL the backend reports for a task.
func ResultURL(task string) string { return "https://media.example/" + task + ".mp4" }

// Deadline returns the deadline a stage key was last submitted with (zero: none, or never).
func (b *Backend) Deadline(key string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.deadline[key]
}

// Submits returns how often a stage key was submitted.
func (b *Backend) Submits(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.submits[key]
}

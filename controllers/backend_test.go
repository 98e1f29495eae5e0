package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/generation"
)

// step is what the test backend does with one stage.
type step int

const (
	succeed step = iota
	fail
	hang
	refuse // Submit returns a permanent error
)

// script is how the test backend treats one task, stage by stage, and how long each stage takes.
type script struct {
	analyze, render step
	latency         time.Duration
}

// testBackend is a generation.Backend whose outcomes each test controls, keyed by task name.
// It remembers submissions by work key like a real backend would, so it survives a manager
// restart and counts duplicate submissions.
type testBackend struct {
	mu       sync.Mutex
	scripts  map[string]script
	started  map[string]time.Time // by work key
	submits  map[string]int       // by work key
	canceled map[string]bool      // by work key
}

func newTestBackend() *testBackend {
	return &testBackend{scripts: map[string]script{}, started: map[string]time.Time{}, submits: map[string]int{}, canceled: map[string]bool{}}
}

func (b *testBackend) set(task string, s script) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.scripts[task] = s
}

func (b *testBackend) stepFor(w generation.Work) (step, time.Duration) {
	s := b.scripts[w.Task]
	if w.Stage == videogenv1alpha1.StageAnalyze {
		return s.analyze, s.latency
	}
	return s.render, s.latency
}

func (b *testBackend) Submit(_ context.Context, w generation.Work) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st, _ := b.stepFor(w); st == refuse {
		return "", generation.Permanent(errors.New("input refused by test backend"))
	}
	b.submits[w.Key]++
	if _, ok := b.started[w.Key]; !ok {
		b.started[w.Key] = time.Now()
	}
	return "h-" + w.Key, nil
}

func (b *testBackend) Observe(_ context.Context, w generation.Work, handle string) (generation.Observation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if handle != "h-"+w.Key {
		return generation.Observation{}, generation.Permanent(fmt.Errorf("unknown handle %q", handle))
	}
	st, latency := b.stepFor(w)
	if st == hang || time.Since(b.started[w.Key]) < latency {
		return generation.Observation{State: generation.Running, Progress: 50}, nil
	}
	if st == fail {
		return generation.Observation{State: generation.Failed, Message: "scripted failure"}, nil
	}
	obs := generation.Observation{State: generation.Succeeded, Progress: 100}
	if w.Stage == videogenv1alpha1.StageAnalyze {
		obs.Outputs = map[string]string{"faces": "1"}
	} else {
		obs.Result = &videogenv1alpha1.TaskResult{URL: "https://media.example/" + w.Task + ".mp4", MediaType: "video/mp4",
			Metadata: map[string]string{"analyzedFaces": w.Previous["faces"]}}
	}
	return obs, nil
}

func (b *testBackend) Cancel(_ context.Context, w generation.Work, _ string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.canceled[w.Key] = true
	return nil
}

func (b *testBackend) wasCanceled(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.canceled[key]
}

package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// drain is the apiserver's way out of a rollout, started by drainOnSignal.
type drain struct {
	mu      sync.Mutex
	started bool
	onStart []func()
}

// Check is a readiness check: it fails once the drain has started.
func (d *drain) Check(*http.Request) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started {
		return errors.New("shutting down")
	}
	return nil
}

// OnStart has f run when the drain starts, at once if it has.
func (d *drain) OnStart(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started {
		f()
		return
	}
	d.onStart = append(d.onStart, f)
}

func (d *drain) start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.started = true
	for _, f := range d.onStart {
		f()
	}
}

// drainOnSignal starts a drain when signal ends (SIGTERM): its check, a readiness check,
// fails at once, so that the pod leaves its Services' endpoints, and its OnStart functions run
// (the servers stop keeping connections alive); but the returned context, which the manager
// and so every server runs under, ends only delay later: until then the listeners keep
// answering what endpoints, kube-proxy and Ingress controllers still route here (REST
// clients, payment webhooks), where they were refused before. Then the servers shut down
// gracefully as before. A delay of 0 ends the context with signal. after is time.After but
// in tests.
func drainOnSignal(signal context.Context, delay time.Duration, after func(time.Duration) <-chan time.Time,
	logger *slog.Logger) (context.Context, *drain) {
	d := &drain{}
	ctx, cancel := context.WithCancel(context.WithoutCancel(signal))
	go func() {
		<-signal.Done()
		d.start()
		if delay > 0 {
			logger.Info("shutting down: /readyz fails, serving on until the delay passes", "shutdown_delay", delay.String())
			<-after(delay)
		}
		cancel()
	}()
	return ctx, d
}

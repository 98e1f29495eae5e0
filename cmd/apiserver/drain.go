package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// drainOnSignal is the apiserver's way out of a rollout. When signal ends (SIGTERM), the
// returned check, a readiness check, fails at once, so that the pod leaves its Services'
// endpoints; but the returned context, which the manager and so every server runs under, ends
// only delay later: until then the listeners keep answering what endpoints, kube-proxy and
// Ingress controllers still route here (REST clients, payment webhooks), where they were
// refused before. Then the servers shut down gracefully as before. A delay of 0 ends the
// context with signal. after is time.After but in tests.
func drainOnSignal(signal context.Context, delay time.Duration, after func(time.Duration) <-chan time.Time,
	logger *slog.Logger) (context.Context, healthz.Checker) {
	var draining atomic.Bool
	ctx, cancel := context.WithCancel(context.WithoutCancel(signal))
	go func() {
		<-signal.Done()
		draining.Store(true)
		if delay > 0 {
			logger.Info("shutting down: /readyz fails, serving on until the delay passes", "shutdown_delay", delay.String())
			<-after(delay)
		}
		cancel()
	}()
	return ctx, func(*http.Request) error {
		if draining.Load() {
			return errors.New("shutting down")
		}
		return nil
	}
}

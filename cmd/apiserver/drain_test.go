package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/videogen-dev/videogen-operator/internal/httpserver"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// On SIGTERM the apiserver drains before it closes its listener. Interleaving, one rollout:
// the kubelet sends SIGTERM to the pod's containers; at the same moment the endpoints
// controller, kube-proxy on every node and the Ingress controllers still route new
// connections to the pod, and go on doing so until they see the pod leave the endpoints,
// which takes a readiness probe that fails (or the pod's deletion) and then seconds of
// propagation. Before the drain the signal cancelled the manager's context at once: the
// listener closed, and every REST call and payment webhook routed here in those seconds was
// refused (connection refused: a 502 from the Ingress, a failed call for a client, a
// processor's retry schedule for a webhook). Now the signal fails /readyz at once, the API
// keeps answering for --shutdown-delay, and only then the servers shut down as before. The
// test runs main's wiring (addServing) under a real manager on a control plane and drives the
// delay's timer by hand: step 1 the signal, step 2 /readyz fails while an API call still gets
// its answer and the manager still runs, step 3 the delay passes and the manager and the
// listener stop.
func TestShutdownDrainsBeforeTheServersStop(t *testing.T) {
	env, cfg, _, err := testenv.Start()
	if err != nil {
		t.Skipf("no control plane: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	probeAddr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, managerOptions("videogen-system", "0", probeAddr))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	signal, sigterm := context.WithCancel(context.Background())
	delays, fire := make(chan time.Duration, 1), make(chan time.Time)
	after := func(d time.Duration) <-chan time.Time { delays <- d; return fire }
	ctx, draining := drainOnSignal(signal, 5*time.Second, after, logger)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	apiURL := "http://" + l.Addr().String() + "/v1/ping"
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "pong") })
	if err := addServing(ctx, mgr, httpserver.New(l.Addr().String(), mux, httpserver.DefaultTimeouts()), l, draining, logger); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		sigterm()
		select {
		case fire <- time.Now():
		default:
		}
		<-done
	})
	status := func(url string) (int, error) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	readyz := "http://" + probeAddr + "/readyz"
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, err := status(readyz)
		return err == nil && code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("never ready: %v", err)
	}

	// A client with a kept-alive connection (an Ingress controller's upstream pool, a REST
	// client's Transport): kube-proxy keeps sending such connections here whatever the
	// endpoints say, so the drain must close them for the client to reconnect elsewhere.
	kept := &http.Client{Transport: &http.Transport{}}
	keptStatus := func() (int, bool, error) {
		resp, err := kept.Get(apiURL)
		if err != nil {
			return 0, false, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Close, nil
	}
	if _, closing, err := keptStatus(); err != nil || closing {
		t.Fatalf("before the signal: %v, connection closing %v; want a kept-alive answer", err, closing)
	}

	// 1. SIGTERM.
	sigterm()
	select {
	case d := <-delays:
		if d != 5*time.Second {
			t.Errorf("the drain waits %v, want --shutdown-delay, 5s", d)
		}
	case <-time.After(10 * time.Second):
		code, err := status(apiURL)
		t.Fatalf("the signal started no drain; a REST call now gets %d, %v", code, err)
	}
	// 2. Draining: not ready, but serving.
	if code, err := status(readyz); err != nil || code != http.StatusInternalServerError {
		t.Errorf("/readyz while draining: %d, %v; want 500 (not ready), answered", code, err)
	}
	if code, err := status(apiURL); err != nil || code != http.StatusOK {
		t.Errorf("a REST call while draining: %d, %v; want its answer, 200", code, err)
	}
	// The kept-alive client's next request is answered, with Connection: close: its next one
	// opens a new connection, which the Service routes to a pod that is not going away.
	if code, closing, err := keptStatus(); err != nil || code != http.StatusOK || !closing {
		t.Errorf("a kept-alive client while draining: %d, connection closing %v, %v; want 200 and Connection: close", code, closing, err)
	}
	select {
	case err := <-done:
		t.Fatalf("the manager stopped before the delay passed: %v", err)
	default:
	}
	// 3. The delay passes: the servers shut down gracefully, the listener is closed.
	fire <- time.Now()
	select {
	case err := <-done:
		done <- err // for Cleanup
		if err != nil {
			t.Errorf("the manager stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the manager did not stop after the delay")
	}
	if code, err := status(apiURL); err == nil {
		t.Errorf("after the delay the API still answers %d", code)
	}
}

// With --shutdown-delay=0 (make run's local stack) the signal ends everything at once, as
// before the drain: Ctrl-C stops the stack without waiting, and no timer is started.
func TestNoShutdownDelayEndsWithTheSignal(t *testing.T) {
	signal, sigterm := context.WithCancel(context.Background())
	after := func(d time.Duration) <-chan time.Time {
		t.Errorf("a timer of %v was started", d)
		return nil
	}
	ctx, draining := drainOnSignal(signal, 0, after, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := draining.Check(nil); err != nil {
		t.Fatalf("not ready before the signal: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("ended before the signal")
	}
	sigterm()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("did not end with the signal")
	}
	if draining.Check(nil) == nil {
		t.Error("still ready after the signal")
	}
}

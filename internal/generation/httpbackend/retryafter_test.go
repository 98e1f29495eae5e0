package httpbackend

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
)

// A busy backend (the reference worker answers 503 with Retry-After when its queue is full)
// says when to come back; the client waits that long rather than its own short backoff.
func TestRetryAfterIsHonouredUpToMaxDelay(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter string
		maxDelay   time.Duration
		atLeast    time.Duration
		below      time.Duration
	}{
		{"seconds", "1", 3 * time.Second, 900 * time.Millisecond, 3 * time.Second},
		{"capped at MaxDelay", "120", 200 * time.Millisecond, 150 * time.Millisecond, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake()
			var (
				mu    sync.Mutex
				times []time.Time
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				times = append(times, time.Now())
				first := len(times) == 1
				mu.Unlock()
				if first {
					w.Header().Set("Retry-After", tc.retryAfter)
					writeJSON(w, http.StatusServiceUnavailable, protocol.ErrorBody{Error: protocol.ErrorDetail{Code: "busy", Message: "queue full"}})
					return
				}
				fake.ServeHTTP(w, r)
			}))
			defer srv.Close()

			c := newClient(t, srv.URL, func(c *Config) { c.MaxDelay = tc.maxDelay })
			if _, err := c.Submit(context.Background(), work()); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(times) != 2 {
				t.Fatalf("requests = %d, want 2", len(times))
			}
			if wait := times[1].Sub(times[0]); wait < tc.atLeast || wait >= tc.below {
				t.Errorf("waited %v before retrying, want [%v, %v)", wait, tc.atLeast, tc.below)
			}
		})
	}
}

// A backend that is down (connection refused) is retried and, when it stays down, reported
// as an ordinary error: the task waits for its next poll instead of failing.
func TestConnectionRefusedIsRetriedAndNotPermanent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now

	_, err = newClient(t, "http://"+addr, func(c *Config) { c.MaxAttempts = 2 }).Submit(context.Background(), work())
	if err == nil || generation.IsPermanent(err) {
		t.Fatalf("err = %v, want a non-permanent error", err)
	}
}

package outbound

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

// Checked, holds (a regression pin): a receiver's answer costs a delivery worker no more than
// the sender's timeout and 64 KiB, however large or slow its body: a 2xx whose body never ends
// (sent fast, or a byte at a time) is delivered, and a 503 with an endless body is a Retry.
func TestSendIsBoundedByAHugeOrSlowAnswer(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	endless := func(code int, pause time.Duration) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			chunk := make([]byte, 32<<10)
			if pause > 0 {
				chunk = chunk[:1]
			}
			for {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-stop:
					return
				case <-r.Context().Done():
					return
				case <-time.After(pause):
				}
			}
		}
	}
	const timeout = 500 * time.Millisecond
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    Outcome
	}{
		{"2xx, endless body", endless(http.StatusOK, 0), Delivered},
		{"2xx, a byte at a time", endless(http.StatusPartialContent, 50*time.Millisecond), Delivered},
		{"503, endless body", endless(http.StatusServiceUnavailable, 0), Retry},
	} {
		srv := httptest.NewServer(tc.handler)
		start := time.Now()
		res := Send(context.Background(), NewGuardedClient(loopback, timeout),
			Message{URL: srv.URL, ID: "msg_1", Secrets: []string{standardwebhooks.NewSecret()}, Body: []byte("{}")}, time.Now())
		took := time.Since(start)
		srv.CloseClientConnections()
		srv.Close()
		if res.Outcome != tc.want {
			t.Errorf("%s: %+v, want outcome %d", tc.name, res, tc.want)
		}
		if took > 4*timeout {
			t.Errorf("%s: Send took %s, the timeout is %s", tc.name, took, timeout)
		}
	}
}

package httpbackend

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// Seen on a kind cluster while the worker Deployment restarted (its pod IPs given to new pods
// within seconds): ten tasks failed, refunded, with "backend answered POST /v1/stages with 404:
// Not Found". The worker answers every error in the protocol's shape; a bare 404 came from
// another server at the worker's old address, which a Service still routed to. The client took
// it as the backend refusing the input. A 4xx without the protocol's error body is not the
// backend's word: it neither refuses a submission nor says a stage was lost, and is retried as
// an outage until the task's deadline. Failed before with IsPermanent true for both bare rows.
func TestAnAnswerWithoutTheProtocolsErrorBodyIsAnOutage(t *testing.T) {
	for name, tc := range map[string]struct {
		status  int
		body    string
		refused bool // Submit's error is permanent
		lost    bool // Observe's error says the stage was lost
	}{
		"another server's 404 page":     {status: http.StatusNotFound, body: "404 page not found\n"},
		"a proxy's 400 in HTML":         {status: http.StatusBadRequest, body: "<html><body>Bad Request</body></html>"},
		"JSON, not the error shape":     {status: http.StatusNotFound, body: `{"message":"no route"}`},
		"the backend refusing (422)":    {status: http.StatusUnprocessableEntity, body: `{"error":{"code":"invalid_request","message":"no face"}}`, refused: true},
		"the backend not knowing (404)": {status: http.StatusNotFound, body: `{"error":{"code":"not_found","message":"no such stage"}}`, lost: true},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c := newClient(t, srv.URL, nil)
			_, err := c.Observe(context.Background(), work(), "stg_1")
			if err == nil || generation.IsPermanent(err) != tc.lost || errors.Is(err, generation.ErrStageLost) != tc.lost {
				t.Errorf("Observe = %v: permanent %v, lost %v; want both %v",
					err, generation.IsPermanent(err), errors.Is(err, generation.ErrStageLost), tc.lost)
			}
			if tc.lost {
				return // a 404 to a submission is another server's, or a backend's path not found
			}
			_, err = c.Submit(context.Background(), work())
			if err == nil || generation.IsPermanent(err) != tc.refused {
				t.Errorf("Submit = %v: permanent %v, want %v", err, generation.IsPermanent(err), tc.refused)
			}
			if !tc.refused && !strings.Contains(err.Error(), "without the protocol's error body") {
				t.Errorf("Submit's error %q does not say the answer lacked the protocol's error body", err)
			}
		})
	}
}

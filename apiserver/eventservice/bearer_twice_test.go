package eventservice_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
)

// The Event Service read only the first of two Authorization headers.
//
// Input: a request to EventService.Handle (Connect JSON, gRPC, or a plain GET) carrying two
// Authorization headers, e.g. a caller whose HTTP library appends its configured token to one
// a proxy or a sidecar already set, or a client passing the old and the new token during a
// rotation. Reachable: anyone who can reach the API port can send it; net/http keeps both.
//
// What happened: the first header alone decided. [valid, bogus] was served (the Handle RPC,
// which credits points, ran), [bogus, valid] was a 401 "invalid bearer service token" that
// tells a caller holding a valid token that its token is wrong. The REST API on the same port
// answers two Authorization headers with 400 invalid_request (RFC 6750 §3.1, "uses more than
// one method to include an access token"); the Event Service must too, in the caller's
// protocol (Connect invalid_argument is HTTP 400), and run nothing.
func TestTwoAuthorizationHeadersAreA400ForTheEventService(t *testing.T) {
	const valid = "Bearer token-a-0123456789"
	auth, err := eventservice.NewTokenAuth("token-a-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	for _, headers := range [][]string{{valid, "Bearer bogus-token-0123456789"}, {"Bearer bogus-token-0123456789", valid}, {valid, valid}} {
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			ran := false
			next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { ran = true; w.WriteHeader(http.StatusNoContent) })
			req := httptest.NewRequest(method, "/videogen.events.v1.EventService/Handle", nil)
			req.Header.Set("Content-Type", "application/json")
			for _, h := range headers {
				req.Header.Add("Authorization", h)
			}
			rec := httptest.NewRecorder()
			auth.Wrap(next).ServeHTTP(rec, req)
			if rec.Code != http.StatusBadRequest || ran {
				t.Errorf("%s with Authorization headers %q: status %d (handler ran: %v), body %s; want 400 and nothing run",
					method, headers, rec.Code, ran, rec.Body)
			}
		}
	}
}

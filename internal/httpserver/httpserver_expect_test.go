package httpserver

import (
	"net/http"
	"testing"
)

// What breaks: a request with an Expect header other than 100-continue is answered by net/http
// itself, before any handler, with a bare "417 Expectation Failed": no body, no error
// envelope, no request id (its Date and Content-Length made the answer look like a handler's
// to the listener, which puts net/http's other early answers in the envelope).
//
// Input: one request with, say, Expect: 200-ok (a typo, an old client or proxy that sends its
// own expectation, or anyone probing); on the REST API's port as on every other listener.
// Nothing races.
//
// What the user sees: a 417 with an empty body, which its SDK cannot parse as the documented
// {"error":{"code","message","request_id"}}; nothing to quote to support. In the envelope, it
// says which header to fix.
func TestAnExpectationOtherThan100ContinueIsRefusedInTheEnvelope(t *testing.T) {
	addr := serve(t, ok, DefaultTimeouts())
	for _, raw := range []string{
		"POST / HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\n{}",
		"GET / HTTP/1.1\r\nHost: x\r\nExpect: x\r\n\r\n",
		"GET / HTTP/1.0\r\nExpect: x\r\n\r\n",
	} {
		resp := exchange(t, addr, raw)
		expectEnvelope(t, resp, http.StatusExpectationFailed, "invalid_request")
	}
	// Checked, holds: 100-continue (any case) is served as ever.
	if resp := exchange(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n{}"); resp.StatusCode != http.StatusContinue && resp.StatusCode != http.StatusOK {
		t.Errorf("Expect: 100-Continue: %d", resp.StatusCode)
	}
}

package server

import (
	"encoding/json"
	"net/http"
	"testing"
)

// The worker read only the first of two Authorization headers.
//
// Input: a call to /v1/stages with two Authorization headers (a proxy or sidecar in front of
// the worker adding its own, a caller's library appending the configured token to one already
// set). Reachable by anyone who can reach the worker's port.
//
// What happened: the first header alone decided: [valid, bogus] ran the call, [bogus, valid] was
// a 401 "a valid bearer token is required" to a caller that sent one. As the REST API does
// (RFC 6750 §3.1), two Authorization headers are a 400 invalid_request, and nothing runs.
func TestTwoAuthorizationHeadersAreA400ForTheWorker(t *testing.T) {
	srv := newServer(t, "worker-token-0123456789")
	for _, headers := range [][]string{
		{"Bearer worker-token-0123456789", "Bearer bogus"},
		{"Bearer bogus", "Bearer worker-token-0123456789"},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/stages/stg_00", nil)
		for _, h := range headers {
			req.Header.Add("Authorization", h)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || body.Error.Code != "invalid_request" {
			t.Errorf("Authorization headers %q: %d %q; want 400 invalid_request", headers, resp.StatusCode, body.Error.Code)
		}
	}
}

package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/apiserver"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
)

// TestEventServiceNonRPCAnswers: mounted beside the REST API as main does, a request that is
// no RPC gets the REST API's error envelope, with one request id in the header and the body.
func TestEventServiceNonRPCAnswers(t *testing.T) {
	const token = "svc-token-for-tests"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := apiserver.New(apiserver.Config{Logger: log})
	svc, err := eventservice.New(eventservice.StaticSecrets{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mountEventService(srv.Mux(), svc, tokens, log); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	tests := []struct {
		method, path, contentType, token string
		wantStatus                       int
		wantCode                         string
	}{
		{http.MethodPost, "/videogen.events.v1.EventService/Nope", "application/json", token, http.StatusNotFound, "not_found"},
		{http.MethodGet, "/videogen.events.v1.EventService/Handle", "", token, http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodPost, "/videogen.events.v1.EventService/Handle", "text/plain", token, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{http.MethodPost, "/videogen.events.v1.EventService/Nope", "text/plain", "", http.StatusUnauthorized, "invalid_service_token"},
		{http.MethodPost, "/videogen.events.v1.EventService", "application/json", token, http.StatusNotFound, "not_found"},
		// Without the token, what is no RPC is the envelope's 401 too: a form POST (curl -d), and
		// JSON from no RPC client to an unknown procedure or the bare service name.
		{http.MethodPost, "/videogen.events.v1.EventService/Handle", "application/x-www-form-urlencoded", "", http.StatusUnauthorized, "invalid_service_token"},
		{http.MethodPost, "/videogen.events.v1.EventService/Nope", "application/json", "", http.StatusUnauthorized, "invalid_service_token"},
		{http.MethodPost, "/videogen.events.v1.EventService", "application/json", "", http.StatusUnauthorized, "invalid_service_token"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path+" "+tt.contentType, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, hs.URL+tt.path, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct {
				Error struct {
					Code      string `json:"code"`
					Message   string `json:"message"`
					RequestID string `json:"request_id"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatalf("status %d, %s: body is no JSON: %v", resp.StatusCode, resp.Header.Get("Content-Type"), err)
			}
			if resp.StatusCode != tt.wantStatus || e.Error.Code != tt.wantCode {
				t.Fatalf("got %d %q (%q), want %d %q", resp.StatusCode, e.Error.Code, e.Error.Message, tt.wantStatus, tt.wantCode)
			}
			if id := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") || e.Error.RequestID != id {
				t.Errorf("X-Request-Id %q, request_id %q: want the same req_ id", id, e.Error.RequestID)
			}
		})
	}
}

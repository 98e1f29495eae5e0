package eventservice_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
)

// status of a request through TokenAuth.Wrap with the given Authorization.
func authStatus(t *testing.T, auth *eventservice.TokenAuth, authorization string) int {
	t.Helper()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	req := httptest.NewRequest(http.MethodPost, "/videogen.events.v1.EventService/Handle", nil)
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	auth.Wrap(ok).ServeHTTP(rec, req)
	return rec.Code
}

func TestTokenAuth(t *testing.T) {
	auth, err := eventservice.NewTokenAuth("token-a-0123456789", "", "token-b-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		authorization string
		want          int
	}{
		{"Bearer token-a-0123456789", http.StatusNoContent},
		{"Bearer token-b-0123456789", http.StatusNoContent},
		{"bearer token-a-0123456789", http.StatusNoContent}, // scheme is case-insensitive
		{"  Bearer   token-a-0123456789  ", http.StatusNoContent},
		{"", http.StatusUnauthorized},
		{"Bearer", http.StatusUnauthorized},
		{"Bearer ", http.StatusUnauthorized},
		{"Basic dG9rZW4tYQ==", http.StatusUnauthorized},
		{"token-a-0123456789", http.StatusUnauthorized},
		{"Bearer token-A-0123456789", http.StatusUnauthorized},
		{"Bearer token-a-0123456789-longer", http.StatusUnauthorized},
		{"Bearer token-", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		if got := authStatus(t, auth, tt.authorization); got != tt.want {
			t.Errorf("Authorization %q: status %d, want %d", tt.authorization, got, tt.want)
		}
	}
}

func TestTokenAuthRotation(t *testing.T) {
	auth, err := eventservice.NewTokenAuth("old-token-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.SetTokens("new-token-0123456789", "old-token-0123456789"); err != nil {
		t.Fatal(err)
	}
	if authStatus(t, auth, "Bearer new-token-0123456789") != http.StatusNoContent || authStatus(t, auth, "Bearer old-token-0123456789") != http.StatusNoContent {
		t.Fatal("both tokens must be accepted during a rotation")
	}
	if err := auth.SetTokens("new-token-0123456789"); err != nil {
		t.Fatal(err)
	}
	if authStatus(t, auth, "Bearer old-token-0123456789") != http.StatusUnauthorized {
		t.Fatal("old token still accepted after rotation")
	}
	if err := auth.SetTokens("", ""); err == nil {
		t.Fatal("SetTokens with no usable token succeeded")
	}
	if authStatus(t, auth, "Bearer new-token-0123456789") != http.StatusNoContent {
		t.Fatal("a failed SetTokens must keep the previous tokens")
	}
}

func TestTokenAuthNeedsAToken(t *testing.T) {
	if _, err := eventservice.NewTokenAuth(); err == nil {
		t.Error("NewTokenAuth() succeeded")
	}
	if _, err := eventservice.NewTokenAuth(""); err == nil {
		t.Error(`NewTokenAuth("") succeeded`)
	}
	var zero eventservice.TokenAuth // fails closed
	if got := authStatus(t, &zero, "Bearer anything"); got != http.StatusUnauthorized {
		t.Errorf("zero TokenAuth: status %d", got)
	}
}

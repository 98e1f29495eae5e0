package eventservice

import (
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/bearer"
)

// The token check reads no bearer token longer than bearer.MaxTokenBytes (a
// 400), so a service token longer than that, configured, could never be presented: every
// Handle call refused while the Event Service looked healthy. Refused at load, as a short one.
func TestServiceTokensLongerThanTheBearerCapAreRefusedAtLoad(t *testing.T) {
	long := strings.Repeat("a", bearer.MaxTokenBytes+1)
	if _, err := NewTokenAuth(long); err == nil || strings.Contains(err.Error(), "aaaa") {
		t.Errorf("NewTokenAuth with a token of %d bytes: %v; want refused, without the token", len(long), err)
	}
	if _, err := NewTokenAuth(strings.Repeat("a", bearer.MaxTokenBytes)); err != nil {
		t.Errorf("NewTokenAuth with a token at the cap: %v", err)
	}
}

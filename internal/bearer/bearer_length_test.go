package bearer

import (
	"net/http"
	"strings"
	"testing"
)

// FromHeader returned a token of any length (up to net/http's 1 MiB header
// limit), which every server of the project then hashes, looks up or, on the ledger's port,
// sends to the kube-apiserver as a TokenReview (cmd/manager's
// TestAnOversizedBearerTokenIsNotSentToTheKubeAPIServer measures it). Want: a token longer than
// MaxTokenBytes is no token, with a reason fit for a 400; one at the cap is read.
func TestATokenLongerThanTheCapIsMalformed(t *testing.T) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+strings.Repeat("a", MaxTokenBytes))
	if tok, ok, bad := FromHeader(h); len(tok) != MaxTokenBytes || !ok || bad != nil {
		t.Errorf("a token of MaxTokenBytes: %d bytes, %v, %v; want it read", len(tok), ok, bad)
	}
	h.Set("Authorization", "Bearer "+strings.Repeat("a", MaxTokenBytes+1))
	if tok, ok, bad := FromHeader(h); tok != "" || ok || bad == nil || !strings.Contains(bad.Error(), "16385 bytes") {
		t.Errorf("a token one byte over the cap: %d bytes, %v, %v; want no token and why", len(tok), ok, bad)
	}
}

// With the cap, a configured token longer than it can never be presented: Check says so at
// start (the worker's token, a backend's), not every call a 400.
func TestCheckRefusesATokenLongerThanTheCap(t *testing.T) {
	if err := Check(strings.Repeat("a", MaxTokenBytes)); err != nil {
		t.Errorf("Check of a token at the cap: %v", err)
	}
	if err := Check(strings.Repeat("a", MaxTokenBytes+1)); err == nil || strings.Contains(err.Error(), "aaaa") {
		t.Errorf("Check of a token over the cap: %v; want an error that does not show it", err)
	}
}

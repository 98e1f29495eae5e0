package eventservice

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A token removed from --event-service-tokens-file stayed accepted for as
// long as the file also held one line that is no usable token.
//
// Interleaving: the file lists A and B; A leaks, so the operator removes it, and in the same
// edit adds a placeholder for a new caller ("changeme", shorter than the 16-byte minimum). The
// reload refused the whole file and kept the previous tokens, A included, with only an error
// line in the log: the leaked token kept calling Handle. A removal must revoke whatever else
// the file holds; the unusable line is refused on its own (logged), as at start.
func TestTokenRemovedFromAFileWithABadLineIsRevoked(t *testing.T) {
	a, b := "token-a-0123456789abcdef", "token-b-0123456789abcdef"
	path := filepath.Join(t.TempDir(), "tokens")
	write := func(content string) {
		t.Helper()
		// As the kubelet does: write beside, then rename over.
		if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(a + "\n" + b + "\n")
	var logged bytes.Buffer
	auth, err := TokenFileAuth(path, 0, slog.New(slog.NewTextHandler(&logged, nil))) // interval 0: look on every call
	if err != nil {
		t.Fatal(err)
	}
	if !auth.accepts(a) || !auth.accepts(b) {
		t.Fatal("the first file is not what is accepted")
	}

	write(b + "\nchangeme\n")
	if auth.accepts(a) {
		t.Errorf("token A was removed from the file but is still accepted (log: %s)", strings.TrimSpace(logged.String()))
	}
	if !auth.accepts(b) || auth.accepts("changeme") {
		t.Error("after the edit B must be accepted and the short placeholder refused")
	}
	if !strings.Contains(logged.String(), "16") || strings.Contains(logged.String(), "changeme") {
		t.Errorf("the log must say the refused line is too short, without the line itself: %s", logged.String())
	}

	// Checked, holds: a file left with no usable token (emptied for a moment while rewritten,
	// or only a bad line) still revokes nothing.
	write("changeme\n")
	if !auth.accepts(b) {
		t.Error("a file with no usable token revoked every token")
	}
}

// Checked, holds (pin for the fix above): a file read while it is rewritten in place (not by
// the kubelet's rename: `make run`, a host file) may end in the middle of a token. That cut
// token is no usable token, but it is no edit either: the previous tokens stay, so the token
// being written is not refused to its callers until the next look.
func TestTokenFileCutShortMidTokenKeepsThePreviousTokens(t *testing.T) {
	a, b := "token-a-0123456789abcdef", "token-b-0123456789abcdef"
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(a+"\n"+b+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err := TokenFileAuth(path, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// What a reader sees of an in-place rewrite of the same two tokens, mid-way.
	if err := os.WriteFile(path, []byte(a+"\n"+b[:8]), 0o600); err != nil {
		t.Fatal(err)
	}
	if !auth.accepts(a) || !auth.accepts(b) {
		t.Errorf("a file cut short in the middle of token B: A accepted %v, B accepted %v; want both kept", auth.accepts(a), auth.accepts(b))
	}
}

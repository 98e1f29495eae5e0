package eventservice

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Finding (3): the Event Service accepted a service token of any
// non-empty length, one character included.
//
// Input: an operator creates the tokens Secret by hand (`--from-literal=tokens=x`, a placeholder
// such as "changeme" left in a values file, a line cut short by an editor). The apiserver starts
// and EventService.Handle, which turns a verified payment into points, takes that token: a
// one-character token is found by anyone who can reach the port in a few dozen requests, and a
// short one in a few million. What the operator sees: nothing, the RPC works.
//
// The fix: a token shorter than minTokenBytes (16) is refused where tokens are loaded, at start
// (NewTokenAuth, SetTokens, TokenFileAuth) and on a reload of the file (since then that line
// alone is refused and logged, so the same edit's removals still revoke; see
// tokenfile_reload_test.go), with an error that says how long a token must be and does not
// show the token.
func TestShortServiceTokensAreRefusedAtLoad(t *testing.T) {
	long := strings.Repeat("a", 16)
	for _, short := range []string{"zq", "changeme", strings.Repeat("b", 15)} {
		if _, err := NewTokenAuth(long, short); err == nil || !strings.Contains(err.Error(), "16") || strings.Contains(err.Error(), short) {
			t.Errorf("NewTokenAuth with a token of %d bytes: %v; want an error naming the 16-byte minimum, not the token", len(short), err)
		}
		path := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(path, []byte(long+"\n"+short+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := TokenFileAuth(path, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
			t.Errorf("a tokens file with a token of %d bytes was accepted", len(short))
		}
	}
	// Checked, holds: 16 bytes is enough; a failed SetTokens keeps the previous tokens.
	auth, err := NewTokenAuth(long)
	if err != nil {
		t.Fatalf("a token of 16 bytes: %v", err)
	}
	if err := auth.SetTokens("x"); err == nil || !auth.accepts(long) || auth.accepts("x") {
		t.Errorf("SetTokens(\"x\") = %v; the previous token must stay, the short one refused", err)
	}
}

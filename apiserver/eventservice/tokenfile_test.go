package eventservice

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A token added to or removed from the file takes effect without a restart; a file emptied by
// mistake revokes nothing.
func TestTokenFileAuthFollowsChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	write := func(content string) {
		t.Helper()
		// As Kubernetes does: write beside, then rename over.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting until %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	write("# callers of Handle\nold-token-0123456789\n\n")
	auth, err := TokenFileAuth(path, 10*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !auth.accepts("old-token-0123456789") || auth.accepts("# callers of Handle") || auth.accepts("") {
		t.Fatal("the first file is not what is accepted")
	}

	if err := auth.SetTokens("other"); err == nil {
		t.Error("SetTokens changed the tokens of a file-backed TokenAuth")
	}

	write("old-token-0123456789\nnew-token-0123456789\n") // rotation: both valid for a while
	waitFor("the new token is accepted", func() bool { return auth.accepts("new-token-0123456789") })
	if !auth.accepts("old-token-0123456789") {
		t.Error("the old token was dropped while still listed")
	}
	write("new-token-0123456789\n")
	waitFor("the old token is revoked", func() bool { return !auth.accepts("old-token-0123456789") })

	write("\n# nothing\n")
	time.Sleep(100 * time.Millisecond)
	if !auth.accepts("new-token-0123456789") {
		t.Error("an emptied file revoked every token")
	}
}

func TestTokenFileAuthRefusesAMissingOrEmptyFile(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := TokenFileAuth(filepath.Join(dir, "missing"), time.Second, log); err == nil {
		t.Error("a missing file was accepted")
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("# none yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := TokenFileAuth(empty, time.Second, log); err == nil {
		t.Error("a file without tokens was accepted")
	}
}

// BenchmarkTokenCheck compares the check against a fixed token set (an atomic load, as the file
// used to be followed with) with the check against a followed file (a mutex and a clock read per
// call, the file read at most once per interval), under parallel callers.
func BenchmarkTokenCheck(b *testing.B) {
	static, err := NewTokenAuth("token-a-0123456789", "token-b-0123456789")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("token-a-0123456789\ntoken-b-0123456789\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	file, err := TokenFileAuth(path, 5*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		auth *TokenAuth
	}{{"static", static}, {"file", file}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !c.auth.accepts("token-b-0123456789") {
						b.Fatal("token-b-0123456789 refused")
					}
				}
			})
		})
	}
}

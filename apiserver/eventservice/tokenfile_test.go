package eventservice

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A token added to or removed from the file takes effect without a restart; a file emptied by
// mistake revokes nothing.
func TestWatchTokenFileFollowsChanges(t *testing.T) {
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
	write("# callers of Handle\nold-token\n\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	auth, err := WatchTokenFile(ctx, path, 10*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !auth.accepts("old-token") || auth.accepts("# callers of Handle") || auth.accepts("") {
		t.Fatal("the first file is not what is accepted")
	}

	write("old-token\nnew-token\n") // rotation: both valid for a while
	waitFor("the new token is accepted", func() bool { return auth.accepts("new-token") })
	if !auth.accepts("old-token") {
		t.Error("the old token was dropped while still listed")
	}
	write("new-token\n")
	waitFor("the old token is revoked", func() bool { return !auth.accepts("old-token") })

	write("\n# nothing\n")
	time.Sleep(100 * time.Millisecond)
	if !auth.accepts("new-token") {
		t.Error("an emptied file revoked every token")
	}
}

func TestWatchTokenFileRefusesAMissingOrEmptyFile(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := WatchTokenFile(context.Background(), filepath.Join(dir, "missing"), time.Second, log); err == nil {
		t.Error("a missing file was accepted")
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("# none yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := WatchTokenFile(context.Background(), empty, time.Second, log); err == nil {
		t.Error("a file without tokens was accepted")
	}
}

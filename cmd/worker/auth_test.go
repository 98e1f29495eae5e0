package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The token from a Secret made of a file ends in a newline, in the environment as in a mounted
// file; the manager sends it trimmed, so the worker must compare it trimmed.
func TestAuthTrimsTheTokenWhereverItComesFrom(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]config{
		"environment": {Token: "s3cret-0123456789\n"},
		"file":        {TokenFile: file},
	} {
		auth, err := cfg.auth()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if auth.Token != "s3cret-0123456789" || auth.Disabled {
			t.Errorf("%s: token %q (disabled %v), want %q", name, auth.Token, auth.Disabled, "s3cret-0123456789")
		}
	}
	if _, err := (config{Token: " \n"}).auth(); err == nil {
		t.Error("a blank token was accepted: the worker would serve without one")
	}
}

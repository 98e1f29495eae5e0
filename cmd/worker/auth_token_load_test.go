package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The worker's token at load.
//
// (1) Short tokens. Input: an operator starts the worker with a placeholder (`echo dev >
// token`, as the quick start did; `--from-literal=token=changeme`). The worker serves
// /v1/stages, which fetches caller-chosen URLs and fills its disk, to whoever guesses the token:
// a 3-byte one in a few thousand requests. The Event Service refuses a service token under 16
// bytes; the worker took any non-empty one. Want: a start error naming the
// 16-byte minimum and not the token.
//
// (2) A token no request can carry. Input: a token file of two lines (an operator rotating as
// the Event Service's file allows, one token a line), or a token with a control character. The
// worker trimmed the ends and required "a\nb"; the manager read the same file the same way and
// every call it made failed in net/http ("invalid header field value for Authorization")
// before reaching the worker: both started, and every task waited for its deadline and was
// refunded. Want: a start error on the worker (and on the manager, backends' test).
func TestWorkerTokensThatAreShortOrUnsendableAreRefusedAtLoad(t *testing.T) {
	dir := t.TempDir()
	file := func(content string) string {
		p := filepath.Join(dir, "token"+string(rune('a'+len(content)%26)))
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, c := range map[string]struct {
		cfg    config
		secret string
		want   string
	}{
		"a short token from the environment": {config{Token: "changeme\n"}, "changeme", "16"},
		"a short token file":                 {config{TokenFile: file("dev\n")}, "dev", "16"},
		"a two-line token file":              {config{TokenFile: file("first-token-0123456789\nsecond-token-0123456789\n")}, "first-token", "control"},
		"a token with a control character":   {config{Token: "worker-token-\x000123456789"}, "worker-token", "control"},
	} {
		auth, err := c.cfg.auth()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.secret) {
			t.Errorf("%s: auth %+v, %v; want an error saying %q, not showing the token", name, auth, err, c.want)
		}
	}
	// Checked, holds: 16 bytes is enough, and a Secret's trailing newline is no part of it.
	if auth, err := (config{Token: strings.Repeat("k", 16) + "\n"}).auth(); err != nil || auth.Token != strings.Repeat("k", 16) {
		t.Errorf("a 16-byte token: %+v, %v", auth, err)
	}
}

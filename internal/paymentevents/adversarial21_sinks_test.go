package paymentevents_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

// FAILED before the fix (every secret below was accepted, "whsec_AA==" included): a sink's
// secret was only checked to be base64 with a non-empty key, so a one-byte key was taken.
//
// Input: a sinks file whose secret (or a previousSecrets entry) decodes to a key of 1 to 23
// bytes: `whsec_AA==`, a password typed by hand base64'd (`echo -n hunter2 | base64`), a
// placeholder left from a template (`whsec_dGVzdA==`, "test"). Standard Webhooks asks for
// keys of 24 to 64 bytes; the sample says `openssl rand -base64 32`.
//
// What happens in production: the manager starts (or reloads) without a word and signs every
// payment event with that key. A one-byte key has 256 values: anyone who sees one signed
// delivery (a proxy log, the receiver's request log) recovers the key offline in
// microseconds, and can then forge "DISPUTE_CLOSED"/"CHARGE_REFUNDED" deliveries that the
// billing receiver verifies as ours; a 7-byte password falls to a dictionary. The sink's
// signature is its only authentication, so the receiver cannot tell.
//
// Fixed: ParseSinkConfig refuses a secret or previous secret whose key is shorter than
// paymentevents.MinSecretBytes (24, Standard Webhooks' minimum), naming the sink and the
// length; a reloaded file with one is refused like an unreadable one: logged, the last good
// configuration stays in force.
func TestAdversarial21ShortSinkSecretIsRefusedAndTheLastGoodConfigurationKept(t *testing.T) {
	key := func(n int) string {
		return "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", n)))
	}
	const head = "sinks:\n- name: billing\n  url: https://billing.example/hooks\n"
	for _, tc := range []struct{ name, sink string }{
		{"one-byte secret", "  secret: whsec_AA==\n"},
		{"password secret", "  secret: " + key(7) + "\n"},
		{"23-byte secret", "  secret: " + key(23) + "\n"},
		{"one-byte previous secret", "  secret: " + key(32) + "\n  previousSecrets: [whsec_AA==]\n"},
	} {
		cfg, err := paymentevents.ParseSinkConfig([]byte(head + tc.sink))
		if err == nil {
			t.Errorf("%s: accepted (%d sink(s)); a key that short is guessed offline from one delivery", tc.name, len(cfg.Sinks))
			continue
		}
		if !strings.Contains(err.Error(), `"billing"`) || !strings.Contains(err.Error(), "at least 24 bytes") {
			t.Errorf("%s: error %q does not name the sink and the minimum", tc.name, err)
		}
	}
	// Checked, holds: 24 bytes (the minimum) and 64 are taken.
	for _, n := range []int{24, 64} {
		if _, err := paymentevents.ParseSinkConfig([]byte(head + "  secret: " + key(n) + "\n  previousSecrets: [" + key(n) + "]\n")); err != nil {
			t.Errorf("a %d-byte key refused: %v", n, err)
		}
	}

	// A reload that brings a short secret keeps the last good configuration, and says why.
	path := filepath.Join(t.TempDir(), "sinks.yaml")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(validConfig)
	var logged []string
	src, err := paymentevents.NewFileSinksEvery(path, 0, funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	write(head + "  secret: whsec_AA==\n")
	cfg := src.Current()
	if billing, _ := cfg.Find("billing"); len(cfg.Sinks) != 2 || billing.Secret == "whsec_AA==" {
		t.Fatalf("after a reload with a one-byte secret: %+v; want the 2 sinks in force before", cfg.Sinks)
	}
	if !slicesContain(logged, "keeping the previous configuration") || !slicesContain(logged, "at least 24 bytes") {
		t.Errorf("the operator is not told: log %q", logged)
	}
	// And a manager started with it says so at once.
	if _, err := paymentevents.NewFileSinks(path, funcr.New(func(_, _ string) {}, funcr.Options{})); err == nil {
		t.Error("NewFileSinks accepted a one-byte secret at start")
	}
}

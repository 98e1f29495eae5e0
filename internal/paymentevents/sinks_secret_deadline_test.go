package paymentevents_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/videogen-dev/videogen-operator/internal/outbound"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
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
func TestShortSinkSecretIsRefusedAndTheLastGoodConfigurationKept(t *testing.T) {
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

// Checked, holds: a sink that answers 2xx only after the attempt's deadline has not had the
// event as far as the controller can know, and the attempt is a retry with the same
// webhook-id; a sink whose 2xx status arrives in time but whose body trickles past the
// deadline has the event (Delivered), never a retry that would send it once more.
//
// Interleaving (a sink with timeout 50ms): (1) the attempt is sent; (2) the sink takes the
// request and answers only once the controller has given up on it (its handler waits for the
// request's context to end, i.e. the client's deadline, then writes 200): a receiver doing
// slow work before answering, reachable whenever its latency passes the configured timeout.
// What the user sees: the row is a retry ("no answer within 50ms"), the next attempt carries
// the same webhook-id, so a receiver that did process the late one de-duplicates it.
func TestSinkAnsweringAfterTheDeadlineIsARetry(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // read: the server then notices the client hanging up
		if r.URL.Path == "/late" {
			<-r.Context().Done() // the client gave up: its deadline passed
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusOK) // the answer, in time
		http.NewResponseController(w).Flush()
		<-r.Context().Done() // the body never ends before the deadline
	}))
	defer srv.Close()
	sink := paymentevents.Sink{Name: "billing", Secret: standardwebhooks.NewSecret(), Timeout: metav1.Duration{Duration: 50 * time.Millisecond}}

	sink.URL = srv.URL + "/late"
	a := paymentevents.Deliver(context.Background(), paymentevents.NewHTTPClient(), sink, "msg_1", []byte("{}"), time.Now())
	if a.Outcome != outbound.Retry || a.Err == nil || !strings.Contains(a.Err.Error(), "no answer within 50ms") {
		t.Errorf("a 200 after the deadline: %+v (%v); want a retry, no answer within 50ms", a, a.Err)
	}

	sink.URL = srv.URL + "/trickle"
	a = paymentevents.Deliver(context.Background(), paymentevents.NewHTTPClient(), sink, "msg_1", []byte("{}"), time.Now())
	if a.Outcome != outbound.Delivered || a.Status != http.StatusOK {
		t.Errorf("a 200 in time whose body outlived the deadline: %+v (%v); want Delivered", a, a.Err)
	}
}

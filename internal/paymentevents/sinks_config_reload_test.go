package paymentevents_test

import (
	"context"
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

// FAILED before the fix ("0 sinks after the file read \"\"; want the 2 in force"): a sinks file
// that reads empty for a moment was parsed as a valid configuration with no sinks, and put in
// force.
//
// Input: the mounted sinks file reads empty (0 bytes, blank lines, or only a comment): someone
// re-creates the Secret (`kubectl create secret ... --dry-run=client -o yaml | kubectl apply`
// with a typo'd --from-file path gives an empty key; `kubectl edit` saving the key blank; a
// GitOps tool applying the Secret in two steps), and the kubelet projects what it finds. The
// file is the Secret's key verbatim, so each of these is one kubelet sync away.
//
// What happens in production, for as long as the file reads empty (a kubelet sync, about a
// minute, until the file is put back): every PaymentEvent that is due has its rows ended
// "sink was removed from the configuration" (Failed, Forwarded=False, counted
// sink_removed, which no alert watches; each must be found and redelivered by hand), and every event recorded meanwhile gets no row at all (NoSinks): it is sent nowhere,
// for good, and videogen.dev/redeliver cannot send it (no row to retry).
//
// Fixed: a file with no YAML content at all (empty, blanks, comments, a bare "---") is no
// configuration: it is refused like a file that does not parse, the error is logged once
// ("payment event sinks changed but cannot be used; keeping the previous configuration") and
// the last good configuration stays in force. "No sinks" is said explicitly: `sinks: []`.
func TestEmptySinksFileKeepsTheLastGoodConfiguration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sinks.yaml")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil { // as the kubelet swaps it
			t.Fatal(err)
		}
	}
	write(validConfig)
	var logged []string
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	src, err := paymentevents.NewFileSinksEvery(path, 0, log)
	if err != nil {
		t.Fatal(err)
	}
	for _, empty := range []string{"", "\n  \n", "# being rewritten\n", "---\n"} {
		write(empty)
		if cfg := src.Current(); cfg == nil || len(cfg.Sinks) != 2 {
			t.Fatalf("%d sinks after the file read %q; want the 2 in force", len(cfg.Sinks), empty)
		}
		write(validConfig) // put back: the next empty content is a change again
		if cfg := src.Current(); cfg == nil || len(cfg.Sinks) != 2 {
			t.Fatalf("%d sinks after the file was put back", len(cfg.Sinks))
		}
	}
	if !slicesContain(logged, "keeping the previous configuration") || !slicesContain(logged, "is empty") {
		t.Errorf("the operator is not told: log %q", logged)
	}
	// Checked, holds: no sinks said explicitly is a configuration, put in force.
	write("sinks: []\n")
	if cfg := src.Current(); cfg == nil || len(cfg.Sinks) != 0 {
		t.Fatalf("`sinks: []` not in force: %+v", cfg)
	}
	// An empty file at start is refused, like a broken one: the manager says so at once.
	write("")
	if _, err := paymentevents.NewFileSinks(path, log); err == nil {
		t.Fatal("NewFileSinks accepted an empty file at start")
	}
}

func slicesContain(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// FAILED before the fix (`error unmarshaling JSON: ... unknown field "previousSecrets"`): a
// sink had exactly one secret, so rotating it could not be done without a window in which the
// sink rejects every event.
//
// Interleaving: the sink's owner and the operator rotate its secret. Whichever side switches
// first, until the other has switched (the operator edits the Secret, the kubelet projects it
// within about a minute, the receiver deploys its new key on its own schedule), every delivery
// is signed with a key the receiver does not hold: it answers 401 or 400, each attempt is a
// retry, and after maxAttempts (about 2.5 h with the defaults) the rows are given up; the
// critical VideogenPaymentEventsGivenUp fires and each event must be redelivered by hand.
// Completion webhooks (Standard Webhooks too) already avoid this by signing with the previous
// secret during a rotation; sinks could not.
//
// Fixed: a sink takes `previousSecrets` (validated like secret, at most 4); every attempt is
// signed with the secret and each previous one (several v1 signatures, as Standard Webhooks
// allows), so a receiver holding either key verifies it. Rotate: add the new key as secret
// and the old one under previousSecrets, switch the receiver, then drop previousSecrets.
func TestSinkSecretRotationWithoutRejection(t *testing.T) {
	oldKey, newKey := standardwebhooks.NewSecret(), standardwebhooks.NewSecret()
	for _, receiverKey := range []string{oldKey, newKey} {
		var verifyErr error
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, _ := io.ReadAll(r.Body)
			if verifyErr = standardwebhooks.Verify(receiverKey, r.Header, got, time.Now(), 0); verifyErr != nil {
				w.WriteHeader(http.StatusUnauthorized)
			}
		}))
		cfg, err := paymentevents.ParseSinkConfig([]byte("sinks:\n- name: billing\n  url: " + srv.URL +
			"\n  secret: " + newKey + "\n  previousSecrets: [" + oldKey + "]\n"))
		if err != nil {
			srv.Close()
			t.Fatal(err)
		}
		sink, _ := cfg.Find("billing")
		a := paymentevents.Deliver(context.Background(), paymentevents.NewHTTPClient(), sink, "msg_1", []byte("{}"), time.Now())
		srv.Close()
		if a.Outcome != outbound.Delivered || verifyErr != nil {
			t.Errorf("receiver holding the %s key: outcome %v (%v), verify: %v", map[bool]string{true: "old", false: "new"}[receiverKey == oldKey], a.Outcome, a.Err, verifyErr)
		}
	}
	for _, bad := range []string{"  previousSecrets: [whsec_not*base64]\n", "  previousSecrets: [" + oldKey + ", " + oldKey + ", " + oldKey + ", " + oldKey + ", " + oldKey + "]\n"} {
		if _, err := paymentevents.ParseSinkConfig([]byte("sinks:\n- name: billing\n  url: https://b.example\n  secret: " + newKey + "\n" + bad)); err == nil {
			t.Errorf("%q accepted", strings.TrimSpace(bad))
		}
	}
}

// FAILED before the fix (the error read `sink "billing": Post
// "http://127.0.0.1:…/hooks?token=s3cr3t-sink-token": dial tcp …: connection refused`): an
// attempt that got no answer recorded net/http's error, which quotes the whole URL, query
// included.
//
// Input: a sink URL carrying its credential in the query (`?token=…`, `?code=…`: how many
// receivers authenticate webhooks, Azure Functions and Slack-style hooks among them), and a
// sink that is down (connection refused, DNS, TLS, reset). The URL lives in the sinks Secret
// because it is a credential; the error went into status.sinks[].lastError, the Forwarded
// condition's message and the Warning SinkFailed event, which anyone with the namespace's
// built-in `view` role (Events, not Secrets) reads.
//
// Fixed: Deliver names the sink by name and its URL without query, fragment or user info.
func TestDeliveryErrorDoesNotQuoteTheSinkURLQuery(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close() // nothing listens there any more: connection refused
	sink := paymentevents.Sink{Name: "billing", URL: base + "/hooks?token=s3cr3t-sink-token", Secret: standardwebhooks.NewSecret(),
		Timeout: metav1.Duration{Duration: 5 * time.Second}}
	a := paymentevents.Deliver(context.Background(), paymentevents.NewHTTPClient(), sink, "msg_1", []byte("{}"), time.Now())
	if a.Err == nil || a.Outcome != outbound.Retry {
		t.Fatalf("attempt = %+v, want a retry", a)
	}
	if msg := a.Err.Error(); strings.Contains(msg, "s3cr3t") || !strings.Contains(msg, base+"/hooks") {
		t.Fatalf("error %q: it must name the sink's URL without its query", msg)
	}
}

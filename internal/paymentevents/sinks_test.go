package paymentevents_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

const validConfig = `
sinks:
- name: billing
  url: https://billing.example/hooks/payments
  secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
  eventTypes: [DISPUTE_CREATED, CHARGE_REFUNDED]
- name: audit
  url: http://audit.payments.svc:8080/events
  secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
  connectors: [stripe]
  timeout: 3s
retry:
  maxAttempts: 5
`

func TestParseSinkConfigFillsDefaultsAndFilters(t *testing.T) {
	cfg, err := paymentevents.ParseSinkConfig([]byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sinks) != 2 || cfg.Sinks[0].Timeout.Duration != paymentevents.DefaultSinkTimeout || cfg.Sinks[1].Timeout.Duration != 3*time.Second {
		t.Fatalf("sinks = %+v", cfg.Sinks)
	}
	if cfg.Retry.MaxAttempts != 5 || cfg.Retry.InitialBackoff.Duration != paymentevents.DefaultInitialBackoff {
		t.Fatalf("retry = %+v", cfg.Retry)
	}
	billing, _ := cfg.Find("billing")
	audit, _ := cfg.Find("audit")
	dispute := &videogenv1alpha1.PaymentEventSpec{Connector: "adyen", EventType: "DISPUTE_CREATED"}
	if !billing.Accepts(dispute) || audit.Accepts(dispute) {
		t.Error("filters: billing should take the adyen dispute, audit (stripe only) should not")
	}
	if _, ok := cfg.Find("missing"); ok {
		t.Error("Find found a sink that is not configured")
	}
}

func TestParseSinkConfigNamesWhatIsWrong(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{"sinks:\n- name: Billing\n  url: https://x.example\n  secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", `sinks[0] ("Billing"): name must be a DNS label`},
		{"sinks:\n- name: a\n  url: ftp://x.example\n  secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", `sinks[0] ("a"): url must be an absolute http or https URL`},
		{"sinks:\n- name: a\n  url: https://x.example\n  secret: hunter2!", `sinks[0] ("a"): secret`},
		{"sinks:\n- name: a\n  url: https://x.example\n  secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n- name: a\n  url: https://y.example\n  secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", `sinks[1] ("a"): name is used twice`},
		{"sinks:\n- name: a\n  url: https://x.example\n  secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n  evenTypes: [X]", `unknown field "evenTypes"`},
		{"retry:\n  maxAttempts: 1000", "maxAttempts must be between 1 and 100"},
	} {
		_, err := paymentevents.ParseSinkConfig([]byte(tc.config))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config %q: error %v, want it to mention %q", tc.config, err, tc.want)
		}
	}
}

func TestFileSinksReloadsAndKeepsTheLastGoodConfiguration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sinks.yaml")
	write := func(content string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	write(validConfig, time.Now().Add(-time.Hour))
	src, err := paymentevents.NewFileSinks(path, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(src.Current().Sinks); n != 2 {
		t.Fatalf("%d sinks at start", n)
	}
	write("sinks: []\n", time.Now().Add(-time.Minute))
	time.Sleep(1100 * time.Millisecond) // FileSinks looks at most once a second
	if n := len(src.Current().Sinks); n != 0 {
		t.Fatalf("%d sinks after the file was emptied, want 0", n)
	}
	write("sinks: [", time.Now())
	time.Sleep(1100 * time.Millisecond)
	if cfg := src.Current(); cfg == nil || len(cfg.Sinks) != 0 {
		t.Fatalf("a broken file replaced the configuration: %+v", cfg)
	}
	if _, err := paymentevents.NewFileSinks(path, logr.Discard()); err == nil {
		t.Fatal("NewFileSinks accepted a broken file at start")
	}
}

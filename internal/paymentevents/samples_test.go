package paymentevents_test

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

// The sink configuration documented in config/samples must parse.
func TestSampleSinkConfigParses(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "payment_event_sinks_secret.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var secret corev1.Secret
	if err := yaml.Unmarshal(raw, &secret); err != nil {
		t.Fatal(err)
	}
	cfg, err := paymentevents.ParseSinkConfig([]byte(secret.StringData["sinks.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sinks) != 2 {
		t.Fatalf("%d sinks in the sample, want 2", len(cfg.Sinks))
	}
}

// The sample PaymentEvent's name is the one its connector and id derive.
func TestSamplePaymentEventIsNamedByItsID(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "videogen_v1alpha1_paymentevent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pe struct {
		Metadata struct{ Name string }
		Spec     struct{ Connector, MerchantEventID string }
	}
	if err := yaml.Unmarshal(raw, &pe); err != nil {
		t.Fatal(err)
	}
	if want := paymentevents.Name(pe.Spec.Connector, pe.Spec.MerchantEventID); pe.Metadata.Name != want {
		t.Fatalf("sample is named %q, want %q", pe.Metadata.Name, want)
	}
}

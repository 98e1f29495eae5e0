package paymentevents_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

func TestNameIsStableBoundedAndDNSSafe(t *testing.T) {
	// printf evt_1 | sha256sum → 7d4e5a76eae6d8c165410ac19fe6756521ba86ed96752d01…
	if got, want := paymentevents.Name("stripe", "evt_1"), "stripe-7d4e5a76eae6d8c165410ac19fe6756521ba86ed"; got != want {
		t.Fatalf("Name = %q, want %q", got, want)
	}
	for _, id := range []string{"evt_1", "8535253563623704:AUTHORISATION", "sha256:" + strings.Repeat("ab", 32),
		strings.Repeat("Ü/..-", 500), ""} {
		name := paymentevents.Name("authorizenet", id)
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			t.Errorf("Name for %q = %q is not a DNS-1123 subdomain: %v", id, name, msgs)
		}
		if len(name) > len("authorizenet-")+40 {
			t.Errorf("Name for %q is %d characters long", id, len(name))
		}
		if name != paymentevents.Name("authorizenet", id) {
			t.Errorf("Name for %q is not deterministic", id)
		}
	}
	if paymentevents.Name("stripe", "evt_1") == paymentevents.Name("stripe", "evt_2") {
		t.Error("different event ids share a name")
	}
	if paymentevents.Name("stripe", "evt_1") == paymentevents.Name("checkout", "evt_1") {
		t.Error("the same id from two connectors shares a name")
	}
}

func TestLabelsLeaveOutInvalidValues(t *testing.T) {
	got := paymentevents.Labels("stripe", "DISPUTE_CREATED")
	if got["videogen.dev/connector"] != "stripe" || got["videogen.dev/event-type"] != "DISPUTE_CREATED" {
		t.Fatalf("Labels = %v", got)
	}
	if got := paymentevents.Labels("stripe", "not a label value!"); len(got) != 1 {
		t.Fatalf("Labels with an invalid type = %v, want only the connector", got)
	}
}

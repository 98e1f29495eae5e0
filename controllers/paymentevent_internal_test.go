package controllers

import (
	"strings"
	"testing"
	"unicode/utf8"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// A dispute's Warning event names what the processor said the dispute is about, "(unknown)" only
// when it said nothing.
func TestDisputedPayment(t *testing.T) {
	for _, tt := range []struct {
		name string
		d    videogenv1alpha1.PaymentEventDetails
		want string
	}{
		{"payment", videogenv1alpha1.PaymentEventDetails{DisputeID: "du_1", PaymentID: "pi_1", ConnectorTransactionID: "ch_1"},
			"payment pi_1"},
		{"charge only (Stripe, payment_intent null)", videogenv1alpha1.PaymentEventDetails{DisputeID: "du_1", ConnectorTransactionID: "ch_1"},
			"transaction ch_1"},
		{"the dispute's own reference is no payment (Adyen)",
			videogenv1alpha1.PaymentEventDetails{DisputeID: "QFQTPCQ8HXSKGK82", ConnectorTransactionID: "QFQTPCQ8HXSKGK82", MerchantReference: "order-7"},
			`the payment with merchant reference "order-7"`},
		{"nothing", videogenv1alpha1.PaymentEventDetails{DisputeID: "QFQTPCQ8HXSKGK82", ConnectorTransactionID: "QFQTPCQ8HXSKGK82"},
			"payment (unknown)"},
	} {
		if got := disputedPayment(&tt.d); got != tt.want {
			t.Errorf("%s: disputedPayment = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// A redeliver request that finds nothing given up says why: no sink takes the event, some are
// still being tried, or every one has it.
func TestNothingToRedeliver(t *testing.T) {
	rows := func(states ...videogenv1alpha1.DeliveryState) *videogenv1alpha1.PaymentEvent {
		pe := &videogenv1alpha1.PaymentEvent{}
		for i, s := range states {
			pe.Status.Sinks = append(pe.Status.Sinks, videogenv1alpha1.SinkDelivery{Name: string(rune('a' + i)), State: s})
		}
		return pe
	}
	for _, tt := range []struct {
		pe   *videogenv1alpha1.PaymentEvent
		want string
	}{
		{rows(), "no configured sink accepts this event (NoSinks): it was sent nowhere and there is nothing to send again"},
		{rows(videogenv1alpha1.DeliveryDelivered, videogenv1alpha1.DeliveryPending), "no sink was given up; 1 of 2 still pending on their retry schedule"},
		{rows(videogenv1alpha1.DeliveryDelivered), "every sink already has the event"},
	} {
		if got := nothingToRedeliver(tt.pe); got != tt.want {
			t.Errorf("nothingToRedeliver(%d rows) = %q, want %q", len(tt.pe.Status.Sinks), got, tt.want)
		}
	}
}

// status.redeliverHandled holds any annotation value within its 256-character bound: short ones
// as given, longer ones as a hash that tells two long values apart and never matches a short one.
func TestRedeliverHandledValueFitsTheField(t *testing.T) {
	long := strings.Repeat("é", 257)
	other := strings.Repeat("é", 256) + "e"
	for _, v := range []string{"1", "2026-03-01T10:00:00Z", strings.Repeat("x", 256), strings.Repeat("é", 256)} {
		if got := redeliverHandledValue(v); got != v {
			t.Errorf("redeliverHandledValue(%d characters) = %q, want the value itself", utf8.RuneCountInString(v), got)
		}
	}
	h := redeliverHandledValue(long)
	if utf8.RuneCountInString(h) > videogenv1alpha1.PaymentEventMaxRedeliverHandledLength || !strings.HasPrefix(h, "sha256:") {
		t.Fatalf("redeliverHandledValue(257 characters) = %q", h)
	}
	if h != redeliverHandledValue(long) || h == redeliverHandledValue(other) {
		t.Fatalf("long values: %q, %q", h, redeliverHandledValue(other))
	}
	pe := &videogenv1alpha1.PaymentEvent{}
	pe.Annotations = map[string]string{videogenv1alpha1.AnnotationRedeliver: long}
	if !redeliverRequested(pe) {
		t.Fatal("a new long value is no request")
	}
	pe.Status.RedeliverHandled = h
	if redeliverRequested(pe) {
		t.Fatal("a long value carried out is asked again")
	}
}

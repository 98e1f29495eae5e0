package paymentevents_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

var receivedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFromEventKeepsTheNormalizedEventAndOnlyTheBodyHash(t *testing.T) {
	body := []byte(`{"id":"evt_9","card":"4242 4242 4242 4242"}`)
	ev := &connectors.Event{
		Connector: "stripe", Type: connectors.DisputeCreated, ConnectorEventType: "charge.dispute.created",
		MerchantEventID: "evt_9", Complete: true, OccurredAt: time.Unix(1767225590, 0),
		Dispute: &connectors.DisputeDetails{DisputeID: "dp_1", PaymentID: "pi_1", AmountMinor: 2000, Currency: "USD",
			Status: "needs_response", Reason: "fraudulent", CreatedAt: time.Unix(1767225500, 0)},
	}
	pe := paymentevents.FromEvent(ev, "payments", body, receivedAt)

	if pe.Name != paymentevents.Name("stripe", "evt_9") || pe.Namespace != "payments" {
		t.Fatalf("object key = %s/%s", pe.Namespace, pe.Name)
	}
	s := pe.Spec
	if s.Connector != "stripe" || s.EventType != "DISPUTE_CREATED" || s.ConnectorEventType != "charge.dispute.created" ||
		s.MerchantEventID != "evt_9" || !s.Complete {
		t.Fatalf("spec = %+v", s)
	}
	if s.AmountMinor == nil || *s.AmountMinor != 2000 || s.Currency != "USD" {
		t.Fatalf("display amount = %v %q", s.AmountMinor, s.Currency)
	}
	if s.Dispute == nil || s.Dispute.DisputeID != "dp_1" || s.Dispute.Reason != "fraudulent" || s.Dispute.CreatedAt == nil {
		t.Fatalf("dispute = %+v", s.Dispute)
	}
	if s.BodySHA256 != sha256Hex(string(body)) || s.BodySize != int64(len(body)) {
		t.Fatalf("body hash/size = %s/%d", s.BodySHA256, s.BodySize)
	}
	encoded, _ := json.Marshal(pe)
	if strings.Contains(string(encoded), "4242") {
		t.Fatal("the raw body leaked into the object")
	}
}

func TestFromEventBoundsProcessorText(t *testing.T) {
	long := strings.Repeat("é", 2000)
	items := make([]connectors.Event, 40)
	for i := range items {
		items[i] = connectors.Event{Type: connectors.ChargeRefunded, MerchantEventID: long}
	}
	ev := &connectors.Event{
		Connector: "adyen", Type: connectors.ChargeRefunded, MerchantEventID: long, ConnectorEventType: long,
		Refund: &connectors.RefundDetails{RefundID: long, Reason: long, Status: long, Currency: long},
		Items:  items,
	}
	pe := paymentevents.FromEvent(ev, "payments", []byte("{}"), receivedAt)
	s := pe.Spec
	for field, tc := range map[string]struct {
		value string
		max   int
	}{
		"merchantEventID": {s.MerchantEventID, 255}, "connectorEventType": {s.ConnectorEventType, 128},
		"refundID": {s.Refund.RefundID, 255}, "reason": {s.Refund.Reason, 512}, "status": {s.Refund.Status, 512},
		"currency": {s.Refund.Currency, 8}, "items[0].merchantEventID": {s.Items[0].MerchantEventID, 255},
	} {
		if n := utf8.RuneCountInString(tc.value); n != tc.max || !utf8.ValidString(tc.value) {
			t.Errorf("%s: %d characters (valid UTF-8: %v), want %d", field, n, utf8.ValidString(tc.value), tc.max)
		}
	}
	if len(s.Items) != 32 || s.ItemsOmitted != 8 {
		t.Errorf("items = %d stored, %d omitted; want 32 and 8", len(s.Items), s.ItemsOmitted)
	}
	// The name comes from the full id, so a redelivery finds the object despite the cut.
	if pe.Name != paymentevents.Name("adyen", long) {
		t.Error("the name was derived from the truncated id")
	}
}

func TestBodyIsTheStandardWebhooksEnvelope(t *testing.T) {
	ev := &connectors.Event{Connector: "stripe", Type: connectors.PaymentIntentSuccess, MerchantEventID: "evt_1",
		Payment: &connectors.PaymentDetails{PaymentID: "pi_1", AmountMinor: 2000, Currency: "USD"}}
	pe := paymentevents.FromEvent(ev, "payments", []byte("{}"), receivedAt)
	body, err := paymentevents.Body(pe)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Type      string `json:"type"`
		Timestamp string `json:"timestamp"`
		Data      struct {
			ID, Namespace, Connector, EventType string
			Payment                             struct{ PaymentID string }
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Type != "payment_event.payment_intent_success" || got.Timestamp != "2026-01-01T00:00:00Z" ||
		got.Data.ID != pe.Name || got.Data.Namespace != "payments" || got.Data.Connector != "stripe" ||
		got.Data.EventType != "PAYMENT_INTENT_SUCCESS" || got.Data.Payment.PaymentID != "pi_1" {
		t.Fatalf("payload = %s", body)
	}
	again, _ := paymentevents.Body(pe)
	if string(again) != string(body) {
		t.Fatal("the body differs between attempts")
	}
}

func TestFromDeliveryStoresEachItemOnItsOwn(t *testing.T) {
	single := &connectors.Event{Connector: "stripe", Type: connectors.PaymentIntentSuccess, MerchantEventID: "evt_1"}
	if pes := paymentevents.FromDelivery(single, "payments", []byte("{}"), receivedAt); len(pes) != 1 || pes[0].Name != paymentevents.Name("stripe", "evt_1") {
		t.Fatalf("a single event gave %d objects", len(pes))
	}
	batch := &connectors.Event{Connector: "adyen", Type: connectors.PaymentIntentSuccess, MerchantEventID: "psp1:AUTHORISATION",
		Items: []connectors.Event{
			{Connector: "adyen", Type: connectors.PaymentIntentSuccess, MerchantEventID: "psp1:AUTHORISATION"},
			{Connector: "adyen", Type: connectors.DisputeCreated, MerchantEventID: "psp2:CHARGEBACK"},
		}}
	pes := paymentevents.FromDelivery(batch, "payments", []byte("{}"), receivedAt)
	if len(pes) != 2 {
		t.Fatalf("a batch of 2 gave %d objects", len(pes))
	}
	for i, pe := range pes {
		item := batch.Items[i]
		if pe.Name != paymentevents.Name("adyen", item.MerchantEventID) || pe.Spec.EventType != string(item.Type) || len(pe.Spec.Items) != 0 {
			t.Errorf("item %d: %s %s with %d nested items", i, pe.Name, pe.Spec.EventType, len(pe.Spec.Items))
		}
	}
}

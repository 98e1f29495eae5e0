package square_test

import (
	"errors"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/square"
)

// Payload shapes follow the webhook reference pages
// (https://developer.squareup.com/reference/square/webhooks/payment.updated,
// refund.updated, dispute.created, dispute.state.updated).

func paymentEvent(eventType, status string) string {
	return `{"merchant_id":"6SSW7HV8K2ST5","type":"` + eventType + `","event_id":"13b867cf-db3d-4b1c-90b6-2f32a9d78124",` +
		`"created_at":"2020-02-28T13:22:50.042Z","data":{"type":"payment","id":"hYy9pRFVxpDsO1FB05SunFWUe9JZY",` +
		`"object":{"payment":{"id":"hYy9pRFVxpDsO1FB05SunFWUe9JZY","created_at":"2020-11-22T21:16:51.086Z",` +
		`"amount_money":{"amount":100,"currency":"USD"},"status":"` + status + `","source_type":"CARD",` +
		`"location_id":"S8GWD5R9QB376","order_id":"03O3USaPaAaFnI6kkwB1JxGgBsUZY","reference_id":"order-42","version":1}}}}`
}

func refundEvent(eventType, status string) string {
	return `{"merchant_id":"6SSW7HV8K2ST5","type":"` + eventType + `","event_id":"9e3ba4ff-a0a6-4e2d-88c3-a1d7b4b2d9bc",` +
		`"created_at":"2020-02-28T13:42:37.001Z","data":{"type":"refund","id":"KkAkhdMsgzn59SM8A89WgKwekxLZY_ptNBVqHYxt5gAdfcobBe4u1AZsXhoz06KTtuq9Ls24P",` +
		`"object":{"refund":{"id":"KkAkhdMsgzn59SM8A89WgKwekxLZY_ptNBVqHYxt5gAdfcobBe4u1AZsXhoz06KTtuq9Ls24P",` +
		`"amount_money":{"amount":50,"currency":"USD"},"created_at":"2020-02-28T13:42:36.959Z","location_id":"NAQ1FHV6ZJ8YV",` +
		`"order_id":"haOyDuHiqtAXMk0d8pDKXpL7Jg4F","payment_id":"KkAkhdMsgzn59SM8A89WgKwekxLZY","reason":"Customer request","status":"` + status + `","version":1}}}}`
}

func disputeEvent(eventType, state string) string {
	return `{"merchant_id":"VJDQQPGEJ5XKE","location_id":"L1HN3ZMQK64X9","type":"` + eventType + `","event_id":"5b7ba6c3-6c5e-4e0c-9b4c-9e3d2a1f7e55",` +
		`"created_at":"2020-02-19T21:24:53.258Z","data":{"type":"dispute","id":"XDgyFu7yo1E2S5lQGGpYn",` +
		`"object":{"dispute":{"id":"XDgyFu7yo1E2S5lQGGpYn","amount_money":{"amount":8801,"currency":"USD"},"brand_dispute_id":"100000809947",` +
		`"card_brand":"VISA","created_at":"2020-02-19T21:24:53.258Z","disputed_payment":{"payment_id":"fbmsaEOpoARDKxiSGH1fqPuqoqFZY"},` +
		`"due_at":"2020-03-04T00:00:00.000Z","reason":"AMOUNT_DIFFERS","state":"` + state + `","version":1}}}}`
}

func TestParseMapping(t *testing.T) {
	tests := []struct {
		name string
		body string
		want connectors.EventType
	}{
		{"payment.updated COMPLETED", paymentEvent("payment.updated", "COMPLETED"), connectors.PaymentIntentSuccess},
		{"payment.updated APPROVED", paymentEvent("payment.updated", "APPROVED"), connectors.PaymentIntentAuthorizationSuccess},
		{"payment.updated FAILED", paymentEvent("payment.updated", "FAILED"), connectors.PaymentIntentPaymentFailed},
		{"payment.updated CANCELED", paymentEvent("payment.updated", "CANCELED"), connectors.PaymentIntentCanceled},
		{"payment.created PENDING", paymentEvent("payment.created", "PENDING"), connectors.PaymentIntentProcessing},
		{"refund.created PENDING", refundEvent("refund.created", "PENDING"), connectors.RefundProcessing},
		{"refund.updated COMPLETED", refundEvent("refund.updated", "COMPLETED"), connectors.ChargeRefunded},
		{"refund.updated REJECTED", refundEvent("refund.updated", "REJECTED"), connectors.RefundFailure},
		{"refund.updated FAILED", refundEvent("refund.updated", "FAILED"), connectors.RefundFailure},
		{"dispute.created", disputeEvent("dispute.created", "EVIDENCE_REQUIRED"), connectors.DisputeCreated},
		{"dispute.state.updated WON", disputeEvent("dispute.state.updated", "WON"), connectors.DisputeWon},
		{"dispute.state.updated LOST", disputeEvent("dispute.state.updated", "LOST"), connectors.DisputeLost},
		{"dispute.state.updated ACCEPTED", disputeEvent("dispute.state.updated", "ACCEPTED"), connectors.DisputeAccepted},
		{"dispute.state.updated PROCESSING", disputeEvent("dispute.state.updated", "PROCESSING"), connectors.DisputeChallenged},
		{"dispute.state.updated INQUIRY_CLOSED", disputeEvent("dispute.state.updated", "INQUIRY_CLOSED"), connectors.DisputeClosed},
		{"dispute.state.updated EVIDENCE_REQUIRED", disputeEvent("dispute.state.updated", "EVIDENCE_REQUIRED"), connectors.DisputeCreated},
		{"dispute.state.updated INQUIRY_EVIDENCE_REQUIRED", disputeEvent("dispute.state.updated", "INQUIRY_EVIDENCE_REQUIRED"), connectors.EventTypeUnsupported},
		{"payment.updated unknown status", paymentEvent("payment.updated", "SOMETHING_NEW"), connectors.EventTypeUnsupported},
		{"order.created", `{"type":"order.created","event_id":"x","data":{"object":{}}}`, connectors.EventTypeUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := square.New().Parse(&connectors.Request{Body: []byte(tt.body)})
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != tt.want {
				t.Fatalf("Type = %s, want %s", ev.Type, tt.want)
			}
			if tt.want == connectors.EventTypeUnsupported && (ev.Payment != nil || ev.Refund != nil || ev.Dispute != nil) {
				t.Fatalf("unsupported event carries details: %+v", ev)
			}
		})
	}
}

func TestParseDetails(t *testing.T) {
	ev, _ := square.New().Parse(&connectors.Request{Body: []byte(paymentEvent("payment.updated", "COMPLETED"))})
	wantPay := connectors.PaymentDetails{PaymentID: "hYy9pRFVxpDsO1FB05SunFWUe9JZY", ConnectorTransactionID: "hYy9pRFVxpDsO1FB05SunFWUe9JZY",
		MerchantReference: "order-42", AmountMinor: 100, Currency: "USD", Status: "COMPLETED", CreatedAt: time.Date(2020, 11, 22, 21, 16, 51, 86000000, time.UTC)}
	if *ev.Payment != wantPay || ev.MerchantEventID != "13b867cf-db3d-4b1c-90b6-2f32a9d78124" {
		t.Fatalf("payment = %+v", ev.Payment)
	}
	ev, _ = square.New().Parse(&connectors.Request{Body: []byte(refundEvent("refund.updated", "COMPLETED"))})
	wantRef := connectors.RefundDetails{RefundID: "KkAkhdMsgzn59SM8A89WgKwekxLZY_ptNBVqHYxt5gAdfcobBe4u1AZsXhoz06KTtuq9Ls24P",
		PaymentID: "KkAkhdMsgzn59SM8A89WgKwekxLZY", ConnectorTransactionID: "KkAkhdMsgzn59SM8A89WgKwekxLZY_ptNBVqHYxt5gAdfcobBe4u1AZsXhoz06KTtuq9Ls24P",
		AmountMinor: 50, Currency: "USD", Status: "COMPLETED", Reason: "Customer request", CreatedAt: time.Date(2020, 2, 28, 13, 42, 36, 959000000, time.UTC)}
	if *ev.Refund != wantRef {
		t.Fatalf("refund = %+v", ev.Refund)
	}
	ev, _ = square.New().Parse(&connectors.Request{Body: []byte(disputeEvent("dispute.state.updated", "WON"))})
	wantDsp := connectors.DisputeDetails{DisputeID: "XDgyFu7yo1E2S5lQGGpYn", PaymentID: "fbmsaEOpoARDKxiSGH1fqPuqoqFZY", ConnectorTransactionID: "fbmsaEOpoARDKxiSGH1fqPuqoqFZY",
		AmountMinor: 8801, Currency: "USD", Status: "WON", Reason: "AMOUNT_DIFFERS", CreatedAt: time.Date(2020, 2, 19, 21, 24, 53, 258000000, time.UTC)}
	if *ev.Dispute != wantDsp {
		t.Fatalf("dispute = %+v", ev.Dispute)
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	for _, body := range []string{``, `{}`, `{"type":"payment.updated"}`, `{"type":"refund.updated","data":{"object":{"payment":{}}}}`,
		`{"type":"dispute.created","data":{"object":{"dispute":{"amount_money":{"amount":1.5}}}}}`} {
		_, err := square.New().Parse(&connectors.Request{Body: []byte(body)})
		var parseErr *connectors.ParseError
		if !errors.As(err, &parseErr) {
			t.Errorf("Parse(%q) error = %v, want *ParseError", body, err)
		}
	}
}

package checkout_test

import (
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/checkout"
)

// Payload shapes follow the examples on
// https://www.checkout.com/docs/developer-resources/event-notifications/event-types.

func paymentEvent(eventType string) []byte {
	return []byte(`{"id":"evt_az5sblvku4ge3dwpztvyizgcau","type":"` + eventType + `","version":"1.0.29","created_on":"2019-08-24T14:15:22Z",` +
		`"data":{"id":"pay_mbabizu24mvu3mela5njyhpit4","action_id":"act_y3oqhf46pyzuxjbcn2giaqnb44","amount":6540,"currency":"gbp",` +
		`"reference":"ORD-5023-4E89","response_code":"20005","response_summary":"Declined - Do Not Honour","processed_on":"2019-08-24T14:15:20Z"}}`)
}

func disputeEvent(eventType string) []byte {
	return []byte(`{"id":"evt_b6anegml5j6u7kwzuzdg6r4sem","type":"` + eventType + `","timestamp":"2022-12-15T15:20:32.582+00:00","version":"1.0.6",` +
		`"data":{"id":"dsp_9rjdlsd4epepfjyyf9vl","date":"2022-12-15T15:20:31.5042702+00:00","category":"fraudulent","amount":8150,` +
		`"currency":"GBP","reason_code":"10.4","payment_id":"pay_cnhuomagalglgozxy5zm","payment_action_id":"act_7B15779D173D0W45700D",` +
		`"payment_reference":"Disputes QA","evidence_required_by":"2023-10-31T18:00:00+00:00"}}`)
}

func TestParseMapping(t *testing.T) {
	tests := []struct {
		eventType string
		body      []byte
		want      connectors.EventType
	}{
		{"payment_approved", paymentEvent("payment_approved"), connectors.PaymentIntentAuthorizationSuccess},
		{"payment_declined", paymentEvent("payment_declined"), connectors.PaymentIntentAuthorizationFailure},
		{"payment_pending", paymentEvent("payment_pending"), connectors.PaymentIntentProcessing},
		{"payment_captured", paymentEvent("payment_captured"), connectors.PaymentIntentCaptureSuccess},
		{"payment_capture_declined", paymentEvent("payment_capture_declined"), connectors.PaymentIntentCaptureFailure},
		{"payment_canceled", paymentEvent("payment_canceled"), connectors.PaymentIntentCanceled},
		{"payment_voided", paymentEvent("payment_voided"), connectors.PaymentIntentCanceled},
		{"payment_refunded", paymentEvent("payment_refunded"), connectors.ChargeRefunded},
		{"payment_refund_pending", paymentEvent("payment_refund_pending"), connectors.RefundProcessing},
		{"payment_refund_declined", paymentEvent("payment_refund_declined"), connectors.RefundFailure},
		{"dispute_received", disputeEvent("dispute_received"), connectors.DisputeCreated},
		{"dispute_evidence_required", disputeEvent("dispute_evidence_required"), connectors.DisputeCreated},
		{"dispute_evidence_submitted", disputeEvent("dispute_evidence_submitted"), connectors.DisputeChallenged},
		{"dispute_won", disputeEvent("dispute_won"), connectors.DisputeWon},
		{"dispute_lost", disputeEvent("dispute_lost"), connectors.DisputeLost},
		{"dispute_accepted", disputeEvent("dispute_accepted"), connectors.DisputeAccepted},
		{"dispute_canceled", disputeEvent("dispute_canceled"), connectors.DisputeClosed},
		{"dispute_resolved", disputeEvent("dispute_resolved"), connectors.DisputeClosed},
		{"card_verified", paymentEvent("card_verified"), connectors.EventTypeUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.eventType, func(t *testing.T) {
			ev, err := checkout.New().Parse(&connectors.Request{Body: tt.body})
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != tt.want || ev.ConnectorEventType != tt.eventType {
				t.Fatalf("Type = %s, want %s", ev.Type, tt.want)
			}
			if tt.want == connectors.EventTypeUnsupported && (ev.Payment != nil || ev.Refund != nil || ev.Dispute != nil) {
				t.Fatalf("unsupported event carries details: %+v", ev)
			}
		})
	}
}

func TestParseDetails(t *testing.T) {
	ev, _ := checkout.New().Parse(&connectors.Request{Body: paymentEvent("payment_declined")})
	wantPay := connectors.PaymentDetails{PaymentID: "pay_mbabizu24mvu3mela5njyhpit4", ConnectorTransactionID: "act_y3oqhf46pyzuxjbcn2giaqnb44",
		MerchantReference: "ORD-5023-4E89", AmountMinor: 6540, Currency: "GBP", Status: "20005", Reason: "Declined - Do Not Honour",
		CreatedAt: time.Date(2019, 8, 24, 14, 15, 20, 0, time.UTC)}
	if *ev.Payment != wantPay || !ev.OccurredAt.Equal(time.Date(2019, 8, 24, 14, 15, 22, 0, time.UTC)) {
		t.Fatalf("payment = %+v occurred %v", ev.Payment, ev.OccurredAt)
	}

	ev, _ = checkout.New().Parse(&connectors.Request{Body: paymentEvent("payment_refunded")})
	if ev.Refund.RefundID != "act_y3oqhf46pyzuxjbcn2giaqnb44" || ev.Refund.PaymentID != "pay_mbabizu24mvu3mela5njyhpit4" || ev.Refund.AmountMinor != 6540 {
		t.Fatalf("refund = %+v", ev.Refund)
	}

	ev, _ = checkout.New().Parse(&connectors.Request{Body: disputeEvent("dispute_evidence_required")})
	wantDsp := connectors.DisputeDetails{DisputeID: "dsp_9rjdlsd4epepfjyyf9vl", PaymentID: "pay_cnhuomagalglgozxy5zm",
		ConnectorTransactionID: "act_7B15779D173D0W45700D", MerchantReference: "Disputes QA", AmountMinor: 8150, Currency: "GBP",
		Reason: "fraudulent", CreatedAt: time.Date(2022, 12, 15, 15, 20, 31, 504270200, time.UTC)}
	if *ev.Dispute != wantDsp || ev.MerchantEventID != "evt_b6anegml5j6u7kwzuzdg6r4sem" {
		t.Fatalf("dispute = %+v", ev.Dispute)
	}
}

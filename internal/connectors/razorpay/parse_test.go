package razorpay_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/razorpay"
)

// Payload shapes follow https://razorpay.com/docs/webhooks/payloads/payments/,
// .../refunds/ and .../disputes/.

func paymentEvent(name string) []byte {
	return []byte(`{"entity":"event","account_id":"acc_BFQ7uQEaa7j2z7","event":"` + name + `","contains":["payment"],` +
		`"payload":{"payment":{"entity":{"id":"pay_DESlfW9H8K9uqM","entity":"payment","amount":100,"currency":"INR",` +
		`"status":"failed","order_id":"order_DESlLckIVRkHWj","method":"netbanking","error_code":"BAD_REQUEST_ERROR",` +
		`"error_description":"Payment failed","created_at":1567674599}}},"created_at":1567674606}`)
}

func refundEvent(name, status string) []byte {
	return []byte(`{"entity":"event","account_id":"acc_BFQ7uQEaa7j2z7","event":"` + name + `","contains":["refund","payment"],` +
		`"payload":{"refund":{"entity":{"id":"rfnd_DfjjhJC6eDvsiB","entity":"refund","amount":500,"currency":"INR",` +
		`"payment_id":"pay_DfjjdvPTX4sNWk","status":"` + status + `","speed_processed":"normal","created_at":1575875188}},` +
		`"payment":{"entity":{"id":"pay_DfjjdvPTX4sNWk","amount":2000,"currency":"INR","status":"captured"}}},"created_at":1575875188}`)
}

func disputeEvent(name string) []byte {
	return []byte(`{"entity":"event","account_id":"acc_CJoeHMNpi0nC7k","event":"` + name + `","contains":["payment","dispute"],` +
		`"payload":{"payment":{"entity":{"id":"pay_EFtmUsbwpXwBG9","amount":1000,"currency":"INR","status":"captured"}},` +
		`"dispute":{"entity":{"id":"disp_EsIAlDcoUr8CaQ","entity":"dispute","payment_id":"pay_EFtmUsbwpXwBG9","amount":1000,` +
		`"currency":"INR","amount_deducted":0,"reason_code":"chargeback","respond_by":1590604200,"status":"open","phase":"chargeback",` +
		`"created_at":1590059211}}},"created_at":1590059211}`)
}

func TestParseMapping(t *testing.T) {
	tests := []struct {
		name string
		body []byte
		want connectors.EventType
	}{
		{"payment.authorized", paymentEvent("payment.authorized"), connectors.PaymentIntentAuthorizationSuccess},
		{"payment.captured", paymentEvent("payment.captured"), connectors.PaymentIntentCaptureSuccess},
		{"payment.failed", paymentEvent("payment.failed"), connectors.PaymentIntentPaymentFailed},
		{"refund.processed", refundEvent("refund.processed", "processed"), connectors.ChargeRefunded},
		{"refund.failed", refundEvent("refund.failed", "failed"), connectors.RefundFailure},
		{"refund.created pending", refundEvent("refund.created", "pending"), connectors.RefundProcessing},
		{"refund.created instant", refundEvent("refund.created", "processed"), connectors.ChargeRefunded},
		{"payment.dispute.created", disputeEvent("payment.dispute.created"), connectors.DisputeCreated},
		{"payment.dispute.under_review", disputeEvent("payment.dispute.under_review"), connectors.DisputeChallenged},
		{"payment.dispute.won", disputeEvent("payment.dispute.won"), connectors.DisputeWon},
		{"payment.dispute.lost", disputeEvent("payment.dispute.lost"), connectors.DisputeLost},
		{"payment.dispute.closed", disputeEvent("payment.dispute.closed"), connectors.DisputeClosed},
		{"payment.dispute.action_required", disputeEvent("payment.dispute.action_required"), connectors.EventTypeUnsupported},
		{"order.paid", paymentEvent("order.paid"), connectors.EventTypeUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := razorpay.New().Parse(&connectors.Request{Body: tt.body})
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != tt.want || !strings.HasPrefix(tt.name, ev.ConnectorEventType) {
				t.Fatalf("event = %+v, want %s", ev, tt.want)
			}
			if tt.want == connectors.EventTypeUnsupported && (ev.Payment != nil || ev.Refund != nil || ev.Dispute != nil) {
				t.Fatalf("unsupported event carries details: %+v", ev)
			}
		})
	}
}

func TestParseDetails(t *testing.T) {
	ev, _ := razorpay.New().Parse(&connectors.Request{Body: paymentEvent("payment.failed")})
	wantPay := connectors.PaymentDetails{PaymentID: "pay_DESlfW9H8K9uqM", ConnectorTransactionID: "pay_DESlfW9H8K9uqM", AmountMinor: 100,
		Currency: "INR", Status: "failed", Reason: "Payment failed", CreatedAt: time.Unix(1567674599, 0).UTC()}
	if *ev.Payment != wantPay {
		t.Fatalf("payment = %+v", ev.Payment)
	}
	ev, _ = razorpay.New().Parse(&connectors.Request{Body: refundEvent("refund.processed", "processed")})
	wantRef := connectors.RefundDetails{RefundID: "rfnd_DfjjhJC6eDvsiB", PaymentID: "pay_DfjjdvPTX4sNWk", ConnectorTransactionID: "rfnd_DfjjhJC6eDvsiB",
		AmountMinor: 500, Currency: "INR", Status: "processed", CreatedAt: time.Unix(1575875188, 0).UTC()}
	if *ev.Refund != wantRef {
		t.Fatalf("refund = %+v", ev.Refund)
	}
	ev, _ = razorpay.New().Parse(&connectors.Request{Body: disputeEvent("payment.dispute.created")})
	wantDsp := connectors.DisputeDetails{DisputeID: "disp_EsIAlDcoUr8CaQ", PaymentID: "pay_EFtmUsbwpXwBG9", ConnectorTransactionID: "pay_EFtmUsbwpXwBG9",
		AmountMinor: 1000, Currency: "INR", Status: "open", Reason: "chargeback", CreatedAt: time.Unix(1590059211, 0).UTC()}
	if *ev.Dispute != wantDsp {
		t.Fatalf("dispute = %+v", ev.Dispute)
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	for _, body := range []string{``, `null`, `{}`, `{"event":"payment.captured"}`, `{"event":"refund.processed","payload":{}}`,
		`{"event":"payment.dispute.won","payload":{"payment":{"entity":{}}}}`} {
		_, err := razorpay.New().Parse(&connectors.Request{Body: []byte(body)})
		var parseErr *connectors.ParseError
		if !errors.As(err, &parseErr) {
			t.Errorf("Parse(%q) error = %v, want *ParseError", body, err)
		}
	}
}

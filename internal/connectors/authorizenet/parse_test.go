package authorizenet_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/authorizenet"
)

// Payload shape from the appendix of
// https://developer.authorize.net/api/reference/features/webhooks.html.
func notification(eventType string, responseCode int, amount string) []byte {
	return []byte(`{"notificationId":"d0e8e7fe-c3e7-4add-a480-27bc5ce28a18","eventType":"` + eventType + `",` +
		`"eventDate":"2017-03-29T20:48:02.0080095Z","webhookId":"63d6fea2-aa13-4b1d-a204-f5fbc15942b7",` +
		`"payload":{"responseCode":` + strconv.Itoa(responseCode) + `,"authCode":"LZ6I19","avsResponse":"Y","authAmount":` + amount + `,` +
		`"invoiceNumber":"INV-12345","entityName":"transaction","id":"60020981676"}}`)
}

func TestParseMapping(t *testing.T) {
	tests := []struct {
		eventType string
		code      int
		want      connectors.EventType
		refund    bool
	}{
		{"net.authorize.payment.authcapture.created", 1, connectors.PaymentIntentSuccess, false},
		{"net.authorize.payment.authcapture.created", 2, connectors.PaymentIntentPaymentFailed, false},
		{"net.authorize.payment.authcapture.created", 4, connectors.PaymentIntentProcessing, false},
		{"net.authorize.payment.authorization.created", 1, connectors.PaymentIntentAuthorizationSuccess, false},
		{"net.authorize.payment.authorization.created", 3, connectors.PaymentIntentPaymentFailed, false},
		{"net.authorize.payment.capture.created", 1, connectors.PaymentIntentCaptureSuccess, false},
		{"net.authorize.payment.priorAuthCapture.created", 1, connectors.PaymentIntentCaptureSuccess, false},
		{"net.authorize.payment.priorAuthCapture.created", 2, connectors.PaymentIntentCaptureFailure, false},
		{"net.authorize.payment.refund.created", 1, connectors.ChargeRefunded, true},
		{"net.authorize.payment.refund.created", 3, connectors.RefundFailure, true},
		{"net.authorize.payment.void.created", 1, connectors.PaymentIntentCanceled, false},
		{"net.authorize.payment.fraud.held", 4, connectors.PaymentIntentProcessing, false},
		{"net.authorize.payment.fraud.approved", 1, connectors.PaymentIntentAuthorizationSuccess, false},
		{"net.authorize.payment.fraud.declined", 2, connectors.PaymentIntentPaymentFailed, false},
		{"net.authorize.customer.created", 1, connectors.EventTypeUnsupported, false},
	}
	for _, tt := range tests {
		t.Run(tt.eventType+"/"+strconv.Itoa(tt.code), func(t *testing.T) {
			ev, err := authorizenet.New(authorizenet.WithCurrency("CAD")).Parse(&connectors.Request{Body: notification(tt.eventType, tt.code, "300.00")})
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != tt.want || ev.MerchantEventID != "d0e8e7fe-c3e7-4add-a480-27bc5ce28a18" {
				t.Fatalf("event = %+v, want %s", ev, tt.want)
			}
			switch {
			case tt.want == connectors.EventTypeUnsupported:
				if ev.Payment != nil || ev.Refund != nil {
					t.Fatalf("unsupported event carries details: %+v", ev)
				}
			case tt.refund:
				if ev.Refund == nil || ev.Refund.RefundID != "60020981676" || ev.Refund.AmountMinor != 30000 || ev.Refund.Currency != "CAD" {
					t.Fatalf("refund = %+v", ev.Refund)
				}
			default:
				if ev.Payment == nil || ev.Payment.PaymentID != "60020981676" || ev.Payment.AmountMinor != 30000 ||
					ev.Payment.MerchantReference != "INV-12345" || ev.Payment.Currency != "CAD" {
					t.Fatalf("payment = %+v", ev.Payment)
				}
			}
		})
	}
}

func TestParseAmounts(t *testing.T) {
	for amount, want := range map[string]int64{"300.00": 30000, "300": 30000, "1.1": 110, "1.10": 110, "0.01": 1, "45.5": 4550} {
		ev, err := authorizenet.New().Parse(&connectors.Request{Body: notification("net.authorize.payment.authcapture.created", 1, amount)})
		if err != nil || ev.Payment.AmountMinor != want {
			t.Errorf("authAmount %s: err %v, minor %d, want %d", amount, err, ev.Payment.AmountMinor, want)
		}
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	for _, body := range []string{``, `{}`, `{"eventType":7}`, string(notification("net.authorize.payment.authcapture.created", 1, "1e3")),
		string(notification("net.authorize.payment.authcapture.created", 1, "0.001")), string(notification("net.authorize.payment.refund.created", 1, `"x"`))} {
		_, err := authorizenet.New().Parse(&connectors.Request{Body: []byte(body)})
		var parseErr *connectors.ParseError
		if !errors.As(err, &parseErr) {
			t.Errorf("Parse(%q) error = %v, want *ParseError", body, err)
		}
	}
}

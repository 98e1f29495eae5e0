package adyen_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/adyen"
)

// testKey is a made-up HMAC key for items signed in the tests.
const testKey = "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"

// wantID is the id of an item with pspReference QFQTPCQ8HXSKGK82: the outcome is part of it
// unless it is success=true.
func wantID(code, success string) string {
	if success == "true" {
		return "QFQTPCQ8HXSKGK82:" + code
	}
	return "QFQTPCQ8HXSKGK82:" + code + ":" + success
}

// disputeStatusSuffix is what an item's additionalData.disputeStatus adds to its id (given as
// the extra additionalData text of signItem): ":<status>", or nothing without one.
func disputeStatusSuffix(extra string) string {
	const key = `"disputeStatus":"`
	i := strings.Index(extra, key)
	if i < 0 {
		return ""
	}
	rest := extra[i+len(key):]
	return ":" + rest[:strings.Index(rest, `"`)]
}

// A later item with the same pspReference and eventCode whose signed success differs is another
// event (Adyen sends one when the outcome changes), so it has another id; success=true items
// keep the id "pspReference:eventCode" they always had, so their resends stay duplicates.
func TestTheOutcomeIsPartOfAnItemsID(t *testing.T) {
	parse := func(success string) *connectors.Event {
		t.Helper()
		ev, err := adyen.New().Parse(request(batch(signItem(testKey, "QFQTPCQ8HXSKGK82", "", "AUTHORISATION", success, "500", "EUR", ""))))
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	refused, authorised := parse("false"), parse("true")
	if refused.MerchantEventID != "QFQTPCQ8HXSKGK82:AUTHORISATION:false" {
		t.Errorf("refused id = %q", refused.MerchantEventID)
	}
	if authorised.MerchantEventID != "QFQTPCQ8HXSKGK82:AUTHORISATION" {
		t.Errorf("authorised id = %q", authorised.MerchantEventID)
	}
}

func TestParseMapping(t *testing.T) {
	tests := []struct {
		name, code, success, extra string
		want                       connectors.EventType
	}{
		{name: "authorisation ok", code: "AUTHORISATION", success: "true", want: connectors.PaymentIntentAuthorizationSuccess},
		{name: "authorisation refused", code: "AUTHORISATION", success: "false", want: connectors.PaymentIntentAuthorizationFailure},
		{name: "capture ok", code: "CAPTURE", success: "true", want: connectors.PaymentIntentCaptureSuccess},
		{name: "capture rejected", code: "CAPTURE", success: "false", want: connectors.PaymentIntentCaptureFailure},
		{name: "capture failed", code: "CAPTURE_FAILED", success: "true", want: connectors.PaymentIntentCaptureFailure},
		{name: "cancellation", code: "CANCELLATION", success: "true", want: connectors.PaymentIntentCanceled},
		{name: "cancellation failed", code: "CANCELLATION", success: "false", want: connectors.EventTypeUnsupported},
		{name: "cancel_or_refund as cancel", code: "CANCEL_OR_REFUND", success: "true", extra: `,"modification.action":"cancel"`, want: connectors.PaymentIntentCanceled},
		{name: "cancel_or_refund as refund", code: "CANCEL_OR_REFUND", success: "true", extra: `,"modification.action":"refund"`, want: connectors.ChargeRefunded},
		{name: "refund", code: "REFUND", success: "true", want: connectors.ChargeRefunded},
		{name: "refund rejected", code: "REFUND", success: "false", want: connectors.RefundFailure},
		{name: "refund failed", code: "REFUND_FAILED", success: "true", want: connectors.RefundFailure},
		{name: "refunded reversed", code: "REFUNDED_REVERSED", success: "true", want: connectors.RefundFailure},
		{name: "notification of chargeback", code: "NOTIFICATION_OF_CHARGEBACK", success: "true", want: connectors.DisputeCreated},
		{name: "request for information", code: "REQUEST_FOR_INFORMATION", success: "true", want: connectors.DisputeCreated},
		{name: "chargeback undefended", code: "CHARGEBACK", success: "true", extra: `,"disputeStatus":"Undefended"`, want: connectors.DisputeCreated},
		{name: "chargeback lost", code: "CHARGEBACK", success: "true", extra: `,"disputeStatus":"Lost"`, want: connectors.DisputeLost},
		{name: "chargeback accepted", code: "CHARGEBACK", success: "true", extra: `,"disputeStatus":"Accepted"`, want: connectors.DisputeAccepted},
		{name: "information supplied", code: "INFORMATION_SUPPLIED", success: "true", want: connectors.DisputeChallenged},
		{name: "chargeback reversed", code: "CHARGEBACK_REVERSED", success: "true", want: connectors.DisputeWon},
		{name: "prearbitration won", code: "PREARBITRATION_WON", success: "true", want: connectors.DisputeWon},
		{name: "second chargeback", code: "SECOND_CHARGEBACK", success: "true", want: connectors.DisputeLost},
		{name: "prearbitration lost", code: "PREARBITRATION_LOST", success: "true", want: connectors.DisputeLost},
		{name: "unmapped", code: "REPORT_AVAILABLE", success: "true", want: connectors.EventTypeUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := batch(signItem(testKey, "QFQTPCQ8HXSKGK82", "JVBXGSDM53RZNN82", tt.code, tt.success, "500", "usd", tt.extra))
			ev, err := adyen.New().Parse(request(body))
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != tt.want || ev.ConnectorEventType != tt.code || ev.MerchantEventID != wantID(tt.code, tt.success)+disputeStatusSuffix(tt.extra) {
				t.Fatalf("event = %+v", ev)
			}
			switch {
			case ev.Payment != nil:
				if ev.Payment.PaymentID != "JVBXGSDM53RZNN82" || ev.Payment.ConnectorTransactionID != "QFQTPCQ8HXSKGK82" ||
					ev.Payment.AmountMinor != 500 || ev.Payment.Currency != "USD" || ev.Payment.MerchantReference != "order-42" {
					t.Fatalf("payment = %+v", ev.Payment)
				}
			case ev.Refund != nil:
				if ev.Refund.RefundID != "QFQTPCQ8HXSKGK82" || ev.Refund.PaymentID != "JVBXGSDM53RZNN82" || ev.Refund.AmountMinor != 500 {
					t.Fatalf("refund = %+v", ev.Refund)
				}
			case ev.Dispute != nil:
				if ev.Dispute.DisputeID != "QFQTPCQ8HXSKGK82" || ev.Dispute.PaymentID != "JVBXGSDM53RZNN82" || ev.Dispute.Currency != "USD" {
					t.Fatalf("dispute = %+v", ev.Dispute)
				}
			case tt.want != connectors.EventTypeUnsupported:
				t.Fatal("no details")
			}
		})
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	for _, body := range []string{``, `{}`, `{"notificationItems":{}}`, `{"notificationItems":[{}]}`,
		`{"notificationItems":[{"NotificationRequestItem":{"amount":{"value":1.5}}}]}`,
		`{"notificationItems":[{"NotificationRequestItem":{"success":7}}]}`} {
		_, err := adyen.New().Parse(request([]byte(body)))
		var parseErr *connectors.ParseError
		if !errors.As(err, &parseErr) {
			t.Errorf("Parse(%q) error = %v, want *ParseError", body, err)
		}
	}
}

func TestHandleSignedCapture(t *testing.T) {
	body := batch(signItem(testKey, "QFQTPCQ8HXSKGK82", "JVBXGSDM53RZNN82", "CAPTURE", "true", "500", "EUR", ""))
	ev, err := connectors.HandleWith(context.Background(), adyen.New(), request(body), connectors.SecretsFromStrings(phpAuthKey, testKey), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != connectors.PaymentIntentCaptureSuccess || !ev.Complete || ev.Payment.PaymentID != "JVBXGSDM53RZNN82" {
		t.Fatalf("event = %+v", ev)
	}
}

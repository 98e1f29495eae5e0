package authorizenet_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/authorizenet"
)

// A capture or refund held for review has not succeeded.
//
// Authorize.net's response codes (developer.authorize.net/api/reference/responseCodes.html;
// support.authorize.net knowledge article 000001111, "API and Transaction Response Codes"):
// responseCode "1 - Approved, 2 - Declined, 3 - Error, 4 - Action Required (typically used for
// AFDS transactions that are held for review)"; a held transaction waits for the merchant's
// review, which may decline it (net.authorize.payment.fraud.declined). Every
// net.authorize.payment.* notification carries the transaction's responseCode (the webhook
// payload examples, developer.authorize.net/api/reference/features/webhooks.html). The connector
// already reads 4 as PROCESSING for authcapture.created and authorization.created, and as "no
// cancel" for void.created (parse_declined_void_test.go); capture.created, priorAuthCapture.created and
// refund.created read only 2/3 and took 4 for success.
//
// Input: a merchant captures a prior authorization (or refunds a settled one) and the
// transaction is held by a fraud filter; Authorize.net notifies capture.created /
// refund.created with responseCode 4. Before the fix they were PAYMENT_INTENT_CAPTURE_SUCCESS /
// CHARGE_REFUNDED with status "held": every sink (and a filter on CAPTURE_SUCCESS, which is how a
// merchant would ship, or on CHARGE_REFUNDED, how one tells the customer the money is back) was
// told the money had moved while it waits for review, and may never move. Held is not final:
// PAYMENT_INTENT_PROCESSING / REFUND_PROCESSING ("the outcome is pending (async method,
// review)", "a refund was created and is not final yet", connectors/event.go). Ids
// (notificationId) are unchanged; 1 and 2/3 keep their types.
func TestHeldCaptureOrRefundIsNotASuccess(t *testing.T) {
	const key = "adv24b-anet-signature-key"
	for _, tc := range []struct {
		eventType string
		code      int
		want      connectors.EventType
		refund    bool
	}{
		{"net.authorize.payment.capture.created", 4, connectors.PaymentIntentProcessing, false},
		{"net.authorize.payment.priorAuthCapture.created", 4, connectors.PaymentIntentProcessing, false},
		{"net.authorize.payment.refund.created", 4, connectors.RefundProcessing, true},
		// Checked, holds: approved and declined keep their types.
		{"net.authorize.payment.capture.created", 1, connectors.PaymentIntentCaptureSuccess, false},
		{"net.authorize.payment.capture.created", 2, connectors.PaymentIntentCaptureFailure, false},
		{"net.authorize.payment.refund.created", 1, connectors.ChargeRefunded, true},
		{"net.authorize.payment.refund.created", 3, connectors.RefundFailure, true},
	} {
		body := notification(tc.eventType, tc.code, "12.50")
		ev, err := connectors.HandleWith(context.Background(), authorizenet.New(authorizenet.WithCurrency("USD")),
			request(sign(key, body), string(body)), connectors.SecretsFromStrings(key), "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != tc.want || ev.MerchantEventID != "d0e8e7fe-c3e7-4add-a480-27bc5ce28a18" || !ev.Complete {
			t.Errorf("%s responseCode %d: type %s id %q complete %v; want %s", tc.eventType, tc.code, ev.Type, ev.MerchantEventID, ev.Complete, tc.want)
			continue
		}
		if tc.refund {
			if ev.Refund == nil || ev.Refund.AmountMinor != 1250 {
				t.Errorf("%s responseCode %d: refund %+v", tc.eventType, tc.code, ev.Refund)
			}
		} else if ev.Payment == nil || ev.Payment.AmountMinor != 1250 {
			t.Errorf("%s responseCode %d: payment %+v", tc.eventType, tc.code, ev.Payment)
		}
	}
}

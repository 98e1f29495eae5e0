package checkout_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/checkout"
)

// Checkout.com sends payment_approved, payment_declined and payment_paid for payouts
// as well as for payments ("This event occurs when a payment authorization or a payout is
// approved", docs/workflows/webhook-event-types/payment_approved). A payout's data carries a
// "destination" (the bank account or card paid out to) and a "source" of type
// currency_account (the payment_paid example, docs/developer-resources/webhooks/
// webhook-event-types/payment_paid); a payment has no destination.
//
// Input: a merchant that pays out with Checkout (refunds to a card, marketplace payouts)
// receives payment_approved for a payout, signed correctly. Before the fix it was normalized
// as PAYMENT_INTENT_AUTHORIZATION_SUCCESS with the payout's amount: every sink was told a
// customer's payment of that amount was authorized, when the money went the other way. A
// payout is not a payment event this model describes: EVENT_TYPE_UNSUPPORTED (stored, with
// the processor's type kept in connector_event_type), never a guess.
func TestPayoutApprovedIsNotAPaymentAuthorization(t *testing.T) {
	const key = "adv22-checkout-key"
	for _, tt := range []struct{ name, body string }{
		{"payment_approved", `{"id":"evt_adv22_payout_ok","type":"payment_approved","version":"1.0.43","created_on":"2024-11-12T17:56:40.889Z",` +
			`"data":{"id":"pay_adv22payout","reference":"Payouts - US Testing","action_id":"act_adv22payout","response_code":"10000",` +
			`"response_summary":"Approved","amount":10,"currency":"USD","source":{"type":"currency_account","id":"ca_adv22"},` +
			`"destination":{"type":"bank_account","id":"src_adv22","fingerprint":"adv22"},"processed_on":"2024-11-12T17:56:40.4885594Z"}}`},
		{"payment_declined", `{"id":"evt_adv22_payout_no","type":"payment_declined","created_on":"2024-11-12T17:56:40.889Z",` +
			`"data":{"id":"pay_adv22payout2","action_id":"act_adv22payout2","response_code":"20005","response_summary":"Declined",` +
			`"amount":10,"currency":"USD","source":{"type":"currency_account","id":"ca_adv22"},` +
			`"destination":{"type":"card","id":"src_adv22card"}}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			ev, err := connectors.HandleWith(context.Background(), checkout.New(), request(sign(key, body), body),
				connectors.SecretsFromStrings(key), "", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != connectors.EventTypeUnsupported || ev.Payment != nil || ev.ConnectorEventType != tt.name {
				t.Fatalf("a payout was normalized as %s with %+v; want EVENT_TYPE_UNSUPPORTED without details", ev.Type, ev.Payment)
			}
		})
	}
}

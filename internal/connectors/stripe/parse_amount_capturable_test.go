package stripe_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/stripe"
)

// payment_intent.amount_capturable_updated reported the amount
// asked for, not the amount authorized.
//
// Stripe's event reference for payment_intent.amount_capturable_updated (the same text in
// stripe-ruby's V1PaymentIntentAmountCapturableUpdatedEventNotification and the generated
// client_stripe models): "Occurs when a PaymentIntent has funds to be captured. Check the
// amount_capturable property on the PaymentIntent to determine the amount that can be
// captured. You may capture the PaymentIntent with an amount_to_capture value up to the
// specified amount." With a partial authorization (docs.stripe.com/payments/partial-authorization:
// the issuer approves a portion of the requested amount) amount stays what was requested and
// amount_capturable is what the issuer approved; with multicapture, amount_capturable is what is
// left to capture after a non-final capture.
//
// Input: a merchant requests 20.00 USD with partial authorization allowed; the issuer approves
// 12.00; Stripe sends payment_intent.amount_capturable_updated with amount 2000 and
// amount_capturable 1200, signed. Before the fix it was PAYMENT_INTENT_AUTHORIZATION_SUCCESS with
// AmountMinor 2000: every sink was told 20.00 was held on the card while 12.00 was (a merchant who
// ships against the authorization ships 8.00 it cannot capture). An authorization's amount is
// amount_capturable, as a capture's is amount_received / amount_captured.
func TestAmountCapturableUpdatedReportsTheAmountCapturable(t *testing.T) {
	const secret = "whsec_adv24b"
	const pi = `{"id":"pi_3MtwBwLkdIwHu7ix28a3tqPa","object":"payment_intent","amount":2000,"amount_capturable":1200,` +
		`"amount_received":0,"currency":"usd","status":"requires_capture","created":1680800504,` +
		`"latest_charge":"ch_3MtwBwLkdIwHu7ix0snN0B15","last_payment_error":null,"cancellation_reason":null}`
	now := time.Unix(1686089970, 0)
	body := envelope("payment_intent.amount_capturable_updated", pi)
	ev, err := connectors.HandleWith(context.Background(), stripe.New(),
		request(sign(secret, now.Unix(), body), body), connectors.SecretsFromStrings(secret), "", now)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != connectors.PaymentIntentAuthorizationSuccess || ev.Payment == nil || ev.Payment.AmountMinor != 1200 ||
		ev.Payment.Currency != "USD" || ev.Payment.PaymentID != "pi_3MtwBwLkdIwHu7ix28a3tqPa" || !ev.Complete {
		t.Fatalf("amount_capturable_updated: type %s payment %+v; want AUTHORIZATION_SUCCESS with AmountMinor 1200", ev.Type, ev.Payment)
	}
}

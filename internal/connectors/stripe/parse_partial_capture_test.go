package stripe_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/stripe"
)

// A partial capture's charge.captured reported the authorized amount as captured.
//
// Stripe's Charge object (docs.stripe.com/api/charges/object; the same text in stripe-ruby's
// Stripe::Charge reference): amount is the "Amount intended to be collected by this payment",
// amount_captured the "Amount in cents (or local equivalent) captured (can be less than the
// amount attribute on the charge if a partial capture was made)". A PaymentIntent with
// capture_method manual may be captured for less than it authorized (the capture call's
// amount_to_capture; the rest of the hold is released); Stripe then sends charge.captured with
// the charge, amount the authorized 1099 and amount_captured 600, and payment_intent.succeeded
// with amount_received 600 (which this connector already reports: the money received, not the
// amount asked for).
//
// Input: a merchant authorizes 10.99 EUR and captures 6.00; Stripe sends charge.captured, signed.
// Before the fix it was PAYMENT_INTENT_CAPTURE_SUCCESS with AmountMinor 1099: every sink was told
// 10.99 was captured (and the PaymentEvent showed 1099 EUR) while 6.00 was, and the same
// payment's payment_intent.succeeded said 600: two events of one capture disagreeing on the
// money. A captured charge's amount is amount_captured; an uncaptured one (charge.succeeded
// with captured false: an authorization) keeps amount, what was authorized.
func TestPartialCaptureReportsTheAmountCaptured(t *testing.T) {
	const secret = "whsec_adv24"
	const partial = `{"id":"ch_3MmlLrLkdIwHu7ix0snN0B15","object":"charge","amount":1099,"amount_captured":600,` +
		`"amount_refunded":0,"captured":true,"currency":"eur","status":"succeeded","created":1679090539,` +
		`"failure_message":null,"payment_intent":"pi_3MmlLrLkdIwHu7ix0uke3Ezy","refunds":null}`
	const uncaptured = `{"id":"ch_3MmlLrLkdIwHu7ix0snN0B15","object":"charge","amount":1099,"amount_captured":0,` +
		`"amount_refunded":0,"captured":false,"currency":"eur","status":"succeeded","created":1679090539,` +
		`"failure_message":null,"payment_intent":"pi_3MmlLrLkdIwHu7ix0uke3Ezy","refunds":null}`
	now := time.Unix(1686089970, 0)
	for _, tc := range []struct {
		name, eventType, object string
		want                    connectors.EventType
		amount                  int64
	}{
		{"charge.captured, partial", "charge.captured", partial, connectors.PaymentIntentCaptureSuccess, 600},
		// Checked, holds: an authorization reports what was authorized.
		{"charge.succeeded, uncaptured", "charge.succeeded", uncaptured, connectors.PaymentIntentAuthorizationSuccess, 1099},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := envelope(tc.eventType, tc.object)
			ev, err := connectors.HandleWith(context.Background(), stripe.New(),
				request(sign(secret, now.Unix(), body), body), connectors.SecretsFromStrings(secret), "", now)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != tc.want || ev.Payment == nil || ev.Payment.AmountMinor != tc.amount || ev.Payment.Currency != "EUR" ||
				ev.Payment.PaymentID != "pi_3MmlLrLkdIwHu7ix0uke3Ezy" || !ev.Complete {
				t.Fatalf("%s: type %s payment %+v; want %s with AmountMinor %d", tc.eventType, ev.Type, ev.Payment, tc.want, tc.amount)
			}
		})
	}
}

package stripe_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/stripe"
)

// Payload shapes follow the Event, PaymentIntent, Charge, Refund and Dispute
// objects in the Stripe API reference (https://docs.stripe.com/api). They
// are exercised through Parse, which needs no signature.

func envelope(eventType, object string) []byte {
	return []byte(`{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","api_version":"2022-11-15","created":1686089970,` +
		`"type":"` + eventType + `","data":{"object":` + object + `}}`)
}

const paymentIntent = `{"id":"pi_3MtwBwLkdIwHu7ix28a3tqPa","object":"payment_intent","amount":2000,"amount_received":1500,` +
	`"currency":"usd","status":"%s","created":1680800504,"latest_charge":"ch_3MtwBwLkdIwHu7ix0snN0B15",` +
	`"last_payment_error":%s,"cancellation_reason":%s}`

func pi(status, lastErr, cancel string) string {
	return fmt.Sprintf(paymentIntent, status, lastErr, cancel)
}

func charge(captured bool, refunds string) string {
	c := "false"
	if captured {
		c = "true"
	}
	return `{"id":"ch_3MmlLrLkdIwHu7ix0snN0B15","object":"charge","amount":1099,"amount_refunded":500,"captured":` + c +
		`,"currency":"eur","status":"succeeded","created":1679090539,"failure_message":null,` +
		`"payment_intent":"pi_3MmlLrLkdIwHu7ix0uke3Ezy","refunds":` + refunds + `}`
}

const refundObject = `{"id":"re_1Nispe2eZvKYlo2Cd31jOCgZ","object":"refund","amount":1000,"charge":"ch_1NirD82eZvKYlo2CIvbtLWuY",` +
	`"created":1692942318,"currency":"usd","payment_intent":"pi_1GszsK2eZvKYlo2CfhZyoZLp","reason":"requested_by_customer",` +
	`"status":"%s","failure_reason":%s}`

const disputeObject = `{"id":"du_1MtJUT2eZvKYlo2CNaw2HvEv","object":"dispute","amount":1000,"charge":"ch_1AZtxr2eZvKYlo2CJDX8whov",` +
	`"created":1680651737,"currency":"usd","payment_intent":{"id":"pi_expanded","object":"payment_intent"},"reason":"fraudulent","status":"%s"}`

func TestParseMapping(t *testing.T) {
	tests := []struct {
		name    string
		body    []byte
		want    connectors.EventType
		payment *connectors.PaymentDetails
		refund  *connectors.RefundDetails
		dispute *connectors.DisputeDetails
	}{
		{name: "payment_intent.succeeded", body: envelope("payment_intent.succeeded", pi("succeeded", "null", "null")),
			want: connectors.PaymentIntentSuccess,
			payment: &connectors.PaymentDetails{PaymentID: "pi_3MtwBwLkdIwHu7ix28a3tqPa", ConnectorTransactionID: "ch_3MtwBwLkdIwHu7ix0snN0B15",
				AmountMinor: 1500, Currency: "USD", Status: "succeeded", CreatedAt: time.Unix(1680800504, 0).UTC()}},
		{name: "payment_intent.payment_failed", body: envelope("payment_intent.payment_failed", pi("requires_payment_method", `{"code":"card_declined","message":"Your card was declined."}`, "null")),
			want: connectors.PaymentIntentPaymentFailed,
			payment: &connectors.PaymentDetails{PaymentID: "pi_3MtwBwLkdIwHu7ix28a3tqPa", ConnectorTransactionID: "ch_3MtwBwLkdIwHu7ix0snN0B15",
				AmountMinor: 2000, Currency: "USD", Status: "requires_payment_method", Reason: "Your card was declined.", CreatedAt: time.Unix(1680800504, 0).UTC()}},
		{name: "payment_intent.processing", body: envelope("payment_intent.processing", pi("processing", "null", "null")), want: connectors.PaymentIntentProcessing},
		{name: "payment_intent.canceled", body: envelope("payment_intent.canceled", pi("canceled", "null", `"abandoned"`)),
			want: connectors.PaymentIntentCanceled,
			payment: &connectors.PaymentDetails{PaymentID: "pi_3MtwBwLkdIwHu7ix28a3tqPa", ConnectorTransactionID: "ch_3MtwBwLkdIwHu7ix0snN0B15",
				AmountMinor: 2000, Currency: "USD", Status: "canceled", Reason: "abandoned", CreatedAt: time.Unix(1680800504, 0).UTC()}},
		{name: "payment_intent.amount_capturable_updated", body: envelope("payment_intent.amount_capturable_updated", pi("requires_capture", "null", "null")), want: connectors.PaymentIntentAuthorizationSuccess},
		{name: "charge.succeeded captured", body: envelope("charge.succeeded", charge(true, "null")), want: connectors.PaymentIntentSuccess,
			payment: &connectors.PaymentDetails{PaymentID: "pi_3MmlLrLkdIwHu7ix0uke3Ezy", ConnectorTransactionID: "ch_3MmlLrLkdIwHu7ix0snN0B15",
				AmountMinor: 1099, Currency: "EUR", Status: "succeeded", CreatedAt: time.Unix(1679090539, 0).UTC()}},
		{name: "charge.succeeded uncaptured", body: envelope("charge.succeeded", charge(false, "null")), want: connectors.PaymentIntentAuthorizationSuccess},
		{name: "charge.failed", body: envelope("charge.failed", charge(false, "null")), want: connectors.PaymentIntentPaymentFailed},
		{name: "charge.captured", body: envelope("charge.captured", charge(true, "null")), want: connectors.PaymentIntentCaptureSuccess},
		{name: "charge.refunded", body: envelope("charge.refunded", charge(true, `{"object":"list","data":[{"id":"re_newest"},{"id":"re_older"}]}`)),
			want: connectors.ChargeRefunded,
			refund: &connectors.RefundDetails{RefundID: "re_newest", PaymentID: "pi_3MmlLrLkdIwHu7ix0uke3Ezy", ConnectorTransactionID: "ch_3MmlLrLkdIwHu7ix0snN0B15",
				AmountMinor: 500, Currency: "EUR", Status: "succeeded", CreatedAt: time.Unix(1679090539, 0).UTC()}},
		{name: "charge.refund.updated failed", body: envelope("charge.refund.updated", fmt.Sprintf(refundObject, "failed", `"lost_or_stolen_card"`)),
			want: connectors.RefundFailure,
			refund: &connectors.RefundDetails{RefundID: "re_1Nispe2eZvKYlo2Cd31jOCgZ", PaymentID: "pi_1GszsK2eZvKYlo2CfhZyoZLp", ConnectorTransactionID: "ch_1NirD82eZvKYlo2CIvbtLWuY",
				AmountMinor: 1000, Currency: "USD", Status: "failed", Reason: "lost_or_stolen_card", CreatedAt: time.Unix(1692942318, 0).UTC()}},
		{name: "charge.refund.updated succeeded", body: envelope("charge.refund.updated", fmt.Sprintf(refundObject, "succeeded", "null")), want: connectors.ChargeRefunded},
		{name: "refund.created pending", body: envelope("refund.created", fmt.Sprintf(refundObject, "pending", "null")), want: connectors.RefundProcessing},
		{name: "refund.updated canceled", body: envelope("refund.updated", fmt.Sprintf(refundObject, "canceled", "null")), want: connectors.RefundFailure},
		{name: "refund.created of a charge without a PaymentIntent",
			body: envelope("refund.created", strings.Replace(fmt.Sprintf(refundObject, "pending", "null"), `"pi_1GszsK2eZvKYlo2CfhZyoZLp"`, "null", 1)),
			want: connectors.RefundProcessing,
			refund: &connectors.RefundDetails{RefundID: "re_1Nispe2eZvKYlo2Cd31jOCgZ", PaymentID: "ch_1NirD82eZvKYlo2CIvbtLWuY", ConnectorTransactionID: "ch_1NirD82eZvKYlo2CIvbtLWuY",
				AmountMinor: 1000, Currency: "USD", Status: "pending", Reason: "requested_by_customer", CreatedAt: time.Unix(1692942318, 0).UTC()}},
		{name: "refund.failed", body: envelope("refund.failed", fmt.Sprintf(refundObject, "failed", `"expired_or_canceled_card"`)), want: connectors.RefundFailure},
		{name: "charge.dispute.created", body: envelope("charge.dispute.created", fmt.Sprintf(disputeObject, "needs_response")),
			want: connectors.DisputeCreated,
			dispute: &connectors.DisputeDetails{DisputeID: "du_1MtJUT2eZvKYlo2CNaw2HvEv", PaymentID: "pi_expanded", ConnectorTransactionID: "ch_1AZtxr2eZvKYlo2CJDX8whov",
				AmountMinor: 1000, Currency: "USD", Status: "needs_response", Reason: "fraudulent", CreatedAt: time.Unix(1680651737, 0).UTC()}},
		{name: "charge.dispute.updated under_review", body: envelope("charge.dispute.updated", fmt.Sprintf(disputeObject, "under_review")), want: connectors.DisputeChallenged},
		{name: "charge.dispute.updated needs_response", body: envelope("charge.dispute.updated", fmt.Sprintf(disputeObject, "needs_response")), want: connectors.EventTypeUnsupported},
		{name: "charge.dispute.funds_withdrawn", body: envelope("charge.dispute.funds_withdrawn", fmt.Sprintf(disputeObject, "needs_response")),
			want: connectors.DisputeCreated,
			dispute: &connectors.DisputeDetails{DisputeID: "du_1MtJUT2eZvKYlo2CNaw2HvEv", PaymentID: "pi_expanded", ConnectorTransactionID: "ch_1AZtxr2eZvKYlo2CJDX8whov",
				AmountMinor: 1000, Currency: "USD", Status: "needs_response", Reason: "fraudulent", CreatedAt: time.Unix(1680651737, 0).UTC()}},
		// Sent when a dispute is won; charge.dispute.closed won already says so.
		{name: "charge.dispute.funds_reinstated", body: envelope("charge.dispute.funds_reinstated", fmt.Sprintf(disputeObject, "won")), want: connectors.EventTypeUnsupported},
		{name: "charge.dispute.closed won", body: envelope("charge.dispute.closed", fmt.Sprintf(disputeObject, "won")), want: connectors.DisputeWon},
		{name: "charge.dispute.closed lost", body: envelope("charge.dispute.closed", fmt.Sprintf(disputeObject, "lost")), want: connectors.DisputeLost},
		{name: "charge.dispute.closed warning_closed", body: envelope("charge.dispute.closed", fmt.Sprintf(disputeObject, "warning_closed")), want: connectors.DisputeClosed},
		{name: "unmapped type", body: envelope("customer.subscription.created", `{"id":"sub_1"}`), want: connectors.EventTypeUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := stripe.New().Parse(&connectors.Request{Body: tt.body})
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != tt.want || ev.MerchantEventID != "evt_1NG8Du2eZvKYlo2CUI79vXWy" {
				t.Fatalf("Type = %s id = %s, want %s", ev.Type, ev.MerchantEventID, tt.want)
			}
			if tt.want == connectors.EventTypeUnsupported && (ev.Payment != nil || ev.Refund != nil || ev.Dispute != nil) {
				t.Fatalf("unsupported event carries details: %+v", ev)
			}
			if tt.payment != nil && *ev.Payment != *tt.payment {
				t.Fatalf("Payment =\n%+v\nwant\n%+v", *ev.Payment, *tt.payment)
			}
			if tt.refund != nil && *ev.Refund != *tt.refund {
				t.Fatalf("Refund =\n%+v\nwant\n%+v", *ev.Refund, *tt.refund)
			}
			if tt.dispute != nil && *ev.Dispute != *tt.dispute {
				t.Fatalf("Dispute =\n%+v\nwant\n%+v", *ev.Dispute, *tt.dispute)
			}
		})
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	for _, body := range []string{``, `[`, `[]`, `{"type":7}`, `{"id":"evt_1"}`, `{"type":"charge.succeeded","data":{"object":{"amount":"12"}}}`} {
		_, err := stripe.New().Parse(&connectors.Request{Body: []byte(body)})
		var parseErr *connectors.ParseError
		if !errors.As(err, &parseErr) {
			t.Errorf("Parse(%q) error = %v, want *ParseError", body, err)
		}
	}
}

func TestHandleSignedPaymentEvent(t *testing.T) {
	body := envelope("payment_intent.succeeded", pi("succeeded", "null", "null"))
	now := time.Unix(1686089975, 0)
	req := request(sign("whsec_new", 1686089970, body), body)
	ev, err := connectors.HandleWith(context.Background(), stripe.New(), req, connectors.SecretsFromStrings("whsec_old", "whsec_new"), "", now)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Complete || ev.Connector != "stripe" || ev.Payment.AmountMinor != 1500 || ev.MerchantEventID != "evt_1NG8Du2eZvKYlo2CUI79vXWy" {
		t.Fatalf("event = %+v", ev)
	}
	ev, err = connectors.HandleWith(context.Background(), stripe.New(), req, connectors.SecretsFromStrings("whsec_new"), "caller-id", now)
	if err != nil || ev.MerchantEventID != "caller-id" {
		t.Fatalf("caller id not kept: %v %+v", err, ev)
	}
}

func TestParseFullPaymentIntent(t *testing.T) {
	body, err := os.ReadFile("testdata/payment_intent_succeeded.json")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := stripe.New().Parse(&connectors.Request{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	want := connectors.PaymentDetails{PaymentID: "pi_3MtwBwLkdIwHu7ix28a3tqPa", ConnectorTransactionID: "ch_3MtwBwLkdIwHu7ix0snN0B15",
		AmountMinor: 2000, Currency: "USD", Status: "succeeded", CreatedAt: time.Unix(1680800504, 0).UTC()}
	if ev.Type != connectors.PaymentIntentSuccess || ev.MerchantEventID != "evt_3MtwBwLkdIwHu7ix0ba2Bxn1" || *ev.Payment != want {
		t.Fatalf("event = %+v\npayment = %+v", ev, ev.Payment)
	}
}

// A dispute on a charge made without a PaymentIntent (the API reference's own
// example has "payment_intent": null) names the charge as the payment, as the
// charge's own payment events do, so that a dispute can be matched to them.
func TestParseDisputeOfChargeWithoutPaymentIntent(t *testing.T) {
	body, err := os.ReadFile("testdata/charge_dispute_created.json")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := stripe.New().Parse(&connectors.Request{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	want := connectors.DisputeDetails{DisputeID: "du_1MtJUT2eZvKYlo2CNaw2HvEv", PaymentID: "ch_1AZtxr2eZvKYlo2CJDX8whov",
		ConnectorTransactionID: "ch_1AZtxr2eZvKYlo2CJDX8whov", AmountMinor: 1000, Currency: "USD",
		Status: "warning_needs_response", Reason: "general", CreatedAt: time.Unix(1680651737, 0).UTC()}
	if ev.Type != connectors.DisputeCreated || ev.MerchantEventID != "evt_1MtJUU2eZvKYlo2CXjKq4ZwP" || ev.Dispute == nil || *ev.Dispute != want {
		t.Fatalf("event = %+v\ndispute = %+v", ev, ev.Dispute)
	}
	// The charge of a payment made without a PaymentIntent is that payment's id too.
	charge := envelope("charge.succeeded", `{"id":"ch_1AZtxr2eZvKYlo2CJDX8whov","object":"charge","amount":1000,"captured":true,`+
		`"currency":"usd","status":"succeeded","payment_intent":null}`)
	pay, err := stripe.New().Parse(&connectors.Request{Body: charge})
	if err != nil {
		t.Fatal(err)
	}
	if pay.Payment == nil || pay.Payment.PaymentID != ev.Dispute.PaymentID {
		t.Fatalf("payment %+v is not the disputed payment %s", pay.Payment, ev.Dispute.PaymentID)
	}
}

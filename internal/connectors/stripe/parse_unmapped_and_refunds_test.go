package stripe_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/stripe"
)

// Genuine, correctly signed Stripe deliveries of events the connector does not map
// must be verified and answered EVENT_TYPE_UNSUPPORTED, never refused as unparseable.
//
// Input: an endpoint subscribed to more than the payment events (enabled_events ["*"] is the
// usual setting, and thin-event destinations use the same Stripe-Signature scheme) receives
//
//  1. billing.credit_grant.created: data.object is a billing.credit_grant, whose "amount" is an
//     object ({"monetary":{"currency","value"},"type":"monetary"}, Stripe API reference, Billing
//     Credit Grant object; the stripe-node types say `amount: CreditGrant.Amount`);
//  2. a thin event (API v2, event destinations): "created" is an RFC 3339 string (v2.core.event,
//     `created: String.t()`, "Format: date-time") and there is no data.object at all.
//
// Before the fix Parse decoded every event's data.object into the struct it uses for
// PaymentIntents, Charges, Refunds and Disputes, and "created" as an integer, whatever the
// type: both deliveries were a ParseError, which the webhook ingress answers 400
// invalid_request. Stripe retries a non-2xx for three days, shows the endpoint as failing and
// may disable it, which stops the payment events too. What the user sees: a verified Stripe
// event answered "cannot parse the stripe webhook body: field data.object.amount is a JSON
// object, want an integer".
func TestUnmappedStripeEventsWithOtherShapesAreUnsupportedNotRefused(t *testing.T) {
	now := time.Unix(1726554052, 0)
	tests := []struct {
		name, body, id string
		occurred       time.Time
	}{
		{
			name: "billing.credit_grant.created",
			body: `{"id":"evt_1QCredit","object":"event","api_version":"2024-10-28.acacia","created":1726554052,` +
				`"type":"billing.credit_grant.created","data":{"object":{"id":"credgr_test_61R9","object":"billing.credit_grant",` +
				`"amount":{"monetary":{"currency":"usd","value":1000},"type":"monetary"},` +
				`"applicability_config":{"scope":{"price_type":"metered"}},"category":"paid","created":1726554052,` +
				`"customer":"cus_QsEHa9w3J7t5Y0","effective_at":1726554052,"expires_at":null,"livemode":false,` +
				`"metadata":{},"name":"Purchased credits","test_clock":null,"updated":1726554052,"voided_at":null}}}`,
			id: "evt_1QCredit", occurred: time.Unix(1726554052, 0).UTC(),
		},
		{
			name: "thin event",
			body: `{"id":"evt_test_65R9Ijk8oRuTv3BXp1p16R9Ghm4JVXBtJOKvZ2LBjIQ","object":"v2.core.event",` +
				`"type":"v1.billing.meter.error_report_triggered","livemode":false,"created":"2024-09-17T06:20:52.246Z",` +
				`"related_object":{"id":"mtr_test_61R9IiVS8JbZTjxwu41IcY0k","type":"billing.meter",` +
				`"url":"/v1/billing/meters/mtr_test_61R9IiVS8JbZTjxwu41IcY0k"}}`,
			id: "evt_test_65R9Ijk8oRuTv3BXp1p16R9Ghm4JVXBtJOKvZ2LBjIQ", occurred: time.Date(2024, 9, 17, 6, 20, 52, 246000000, time.UTC),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			req := request(sign("whsec_test", now.Unix(), body), body)
			ev, err := connectors.HandleWith(context.Background(), stripe.New(), req, connectors.SecretsFromStrings("whsec_test"), "", now)
			if err != nil {
				t.Fatalf("a genuine, verified Stripe delivery was refused: %v", err)
			}
			if ev.Type != connectors.EventTypeUnsupported || ev.Payment != nil || ev.Refund != nil || ev.Dispute != nil || ev.Complete {
				t.Fatalf("event = %+v, want EVENT_TYPE_UNSUPPORTED without details", ev)
			}
			if ev.MerchantEventID != tt.id || !ev.OccurredAt.Equal(tt.occurred) {
				t.Fatalf("id, occurredAt = %q, %v; want %q, %v", ev.MerchantEventID, ev.OccurredAt, tt.id, tt.occurred)
			}
		})
	}
}

// Checked, holds (and must keep holding after the fix above): a mapped type whose object does
// not have the shape Stripe documents for it is still a ParseError, not a silently
// unsupported event, and a top-level "created" that is neither a number nor a string is too.
func TestMappedStripeEventWithAWrongShapeIsStillAParseError(t *testing.T) {
	for _, body := range []string{
		`{"id":"evt_1","type":"payment_intent.succeeded","created":1,"data":{"object":{"id":"pi_1","amount":{"value":1}}}}`,
		`{"id":"evt_1","type":"charge.refund.updated","created":1,"data":{"object":{"id":"re_1","status":7}}}`,
		`{"id":"evt_1","type":"charge.dispute.closed","created":1,"data":{"object":[]}}`,
		`{"id":"evt_1","type":"customer.created","created":{},"data":{"object":{}}}`,
	} {
		_, err := stripe.New().Parse(&connectors.Request{Body: []byte(body)})
		if _, ok := err.(*connectors.ParseError); !ok {
			t.Errorf("Parse(%s) error = %v, want *ParseError", body, err)
		}
	}
}

// charge.refunded names the newest refund but reported the charge's cumulative
// amount_refunded as that refund's amount.
//
// Input: a 1000-cent charge refunded in two parts, 400 then 600. Stripe sends charge.refunded
// for each ("Occurs whenever a charge is refunded, including partial refunds"); the Charge it
// carries has amount_refunded = the total refunded so far (400, then 1000) and, on API
// versions before 2022-11-15 (or with the field expanded), refunds.data newest first, each
// Refund with its own amount. Before the fix the second event said refund re_2 of 1000 cents:
// a sink adding up refunds (the event's refund id is unique, so nothing dedups it) sees 1400
// refunded on a 1000 charge, and re_2's own refund.created/charge.refund.updated events say
// 600, so two events about one refund disagree about its amount.
func TestChargeRefundedReportsTheNewestRefundsOwnAmount(t *testing.T) {
	chargeWith := func(amountRefunded int, refunds string) string {
		return `{"id":"ch_3Partial","object":"charge","amount":1000,"amount_refunded":` + fmt.Sprint(amountRefunded) +
			`,"captured":true,"currency":"usd","status":"succeeded","created":1679090539,"payment_intent":"pi_3Partial",` +
			`"refunds":{"object":"list","data":` + refunds + `}}`
	}
	now := time.Unix(1686089975, 0)
	for _, tt := range []struct {
		name       string
		object     string
		wantRefund string
		wantAmount int64
	}{
		{"first partial refund", chargeWith(400, `[{"id":"re_1","object":"refund","amount":400,"status":"succeeded"}]`), "re_1", 400},
		{"second partial refund", chargeWith(1000, `[{"id":"re_2","object":"refund","amount":600,"status":"succeeded"},`+
			`{"id":"re_1","object":"refund","amount":400,"status":"succeeded"}]`), "re_2", 600},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := envelope("charge.refunded", tt.object)
			req := request(sign("whsec_test", now.Unix(), body), body)
			ev, err := connectors.HandleWith(context.Background(), stripe.New(), req, connectors.SecretsFromStrings("whsec_test"), "", now)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != connectors.ChargeRefunded || ev.Refund == nil {
				t.Fatalf("event = %+v", ev)
			}
			if ev.Refund.RefundID != tt.wantRefund || ev.Refund.AmountMinor != tt.wantAmount {
				t.Fatalf("refund %s of %d cents; want %s of %d (the refund's own amount, not the charge's amount_refunded)",
					ev.Refund.RefundID, ev.Refund.AmountMinor, tt.wantRefund, tt.wantAmount)
			}
		})
	}
}

// charge.refunded is sent when a refund is created, and a refund may be created
// pending (bank debits, some wallets: Refund.status "pending", later "succeeded", or "failed"
// with charge.refund.updated). CHARGE_REFUNDED means the refund succeeded (event.go); when the
// charge lists its refunds, the newest one's own status says whether it did. Before the fix a
// pending refund's charge.refunded was CHARGE_REFUNDED with the charge's status "succeeded"
// as the refund's: a sink was told the customer had their money back, and if the refund then
// failed, it received REFUND_FAILURE for a refund it had been told succeeded.
func TestChargeRefundedOfAPendingRefundIsRefundProcessing(t *testing.T) {
	object := `{"id":"ch_3Pending","object":"charge","amount":1000,"amount_refunded":1000,"captured":true,"currency":"eur",` +
		`"status":"succeeded","created":1679090539,"payment_intent":"pi_3Pending","refunds":{"object":"list","data":[` +
		`{"id":"re_pending","object":"refund","amount":1000,"status":"%s"}]}}`
	now := time.Unix(1686089975, 0)
	for _, tt := range []struct {
		status string
		want   connectors.EventType
	}{
		{"pending", connectors.RefundProcessing},
		{"succeeded", connectors.ChargeRefunded},
		{"failed", connectors.RefundFailure},
	} {
		t.Run(tt.status, func(t *testing.T) {
			body := envelope("charge.refunded", fmt.Sprintf(object, tt.status))
			req := request(sign("whsec_test", now.Unix(), body), body)
			ev, err := connectors.HandleWith(context.Background(), stripe.New(), req, connectors.SecretsFromStrings("whsec_test"), "", now)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != tt.want || ev.Refund == nil || ev.Refund.RefundID != "re_pending" || ev.Refund.Status != tt.status {
				t.Fatalf("charge.refunded of a %s refund: %s %+v; want %s with the refund's own status", tt.status, ev.Type, ev.Refund, tt.want)
			}
		})
	}
}

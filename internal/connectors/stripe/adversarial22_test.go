package stripe_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/stripe"
)

// Round 22: genuine, correctly signed Stripe deliveries of events the connector does not map
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
func TestAdv22UnmappedStripeEventsWithOtherShapesAreUnsupportedNotRefused(t *testing.T) {
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
func TestAdv22MappedStripeEventWithAWrongShapeIsStillAParseError(t *testing.T) {
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

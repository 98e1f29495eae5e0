package authorizenet_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/authorizenet"
)

// A void Authorize.net declined is not a payment canceled.
//
// Every net.authorize.payment.* notification carries the transaction's responseCode in its
// payload, void.created included (the payload examples in the appendix of
// developer.authorize.net/api/reference/features/webhooks.html; e.g. a void.created body
// {"responseCode":1,"authAmount":0.29,"entityName":"transaction","id":"60020981680"} in the
// authorizenet crate's test data, docs.rs/crate/authorizenet/latest/source/tests/data/webhooks/
// payment.void.created.json). Authorize.net's "API and Transaction Response Codes"
// (support.authorize.net knowledge article 000001111): "Response Code indicates the overall
// status of the transaction ... 1 - Approved, 2 - Declined, 3 - Error, 4 - Action Required
// (typically used for AFDS transactions that are held for review)". The connector already reads
// it for authcapture, authorization, capture and refund; void.created ignored it.
//
// Input: a merchant voids an unsettled authorization; the void is declined or errors (2 or 3:
// e.g. the transaction settled meanwhile) and Authorize.net notifies void.created with that
// responseCode. Before the fix it was PAYMENT_INTENT_CANCELED with status "declined": every sink
// (and a filter on PAYMENT_INTENT_CANCELED, which is how a merchant would release the order or
// tell the customer the hold is gone) was told the payment was canceled while it stands and
// will settle. A void that was not approved leaves the payment as it was: nothing to map, as
// Adyen's failed CANCELLATION (EVENT_TYPE_UNSUPPORTED, a normal verified result with no details,
// never a guess). A void held for review (4) has canceled nothing yet either. An approved void
// (1) stays PAYMENT_INTENT_CANCELED; the id (notificationId) is unchanged.
func TestDeclinedVoidIsNotAPaymentCanceled(t *testing.T) {
	const key = "adv24-anet-signature-key"
	for _, tc := range []struct {
		code int
		want connectors.EventType
	}{
		{2, connectors.EventTypeUnsupported},
		{3, connectors.EventTypeUnsupported},
		{4, connectors.EventTypeUnsupported},
		// Checked, holds: the approved void is the payment canceled.
		{1, connectors.PaymentIntentCanceled},
	} {
		t.Run(strconv.Itoa(tc.code), func(t *testing.T) {
			body := notification("net.authorize.payment.void.created", tc.code, "0.29")
			ev, err := connectors.HandleWith(context.Background(), authorizenet.New(authorizenet.WithCurrency("USD")),
				request(sign(key, body), string(body)), connectors.SecretsFromStrings(key), "", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != tc.want || ev.MerchantEventID != "d0e8e7fe-c3e7-4add-a480-27bc5ce28a18" ||
				ev.ConnectorEventType != "net.authorize.payment.void.created" {
				t.Fatalf("void.created responseCode %d: type %s id %q payment %+v; want %s", tc.code, ev.Type, ev.MerchantEventID, ev.Payment, tc.want)
			}
			if tc.want == connectors.EventTypeUnsupported {
				if ev.Payment != nil || ev.Refund != nil || ev.Complete {
					t.Fatalf("an unmapped void carries details: %+v", ev)
				}
				return
			}
			if ev.Payment == nil || ev.Payment.PaymentID != "60020981676" || ev.Payment.Status != "approved" || !ev.Complete {
				t.Fatalf("approved void: payment %+v complete %v", ev.Payment, ev.Complete)
			}
		})
	}
}

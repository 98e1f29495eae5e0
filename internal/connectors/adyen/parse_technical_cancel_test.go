package adyen_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/adyen"
)

// A successful TECHNICAL_CANCEL is the payment cancelled.
//
// Adyen's webhook reference (docs.adyen.com/api-explorer/Webhooks/1/post/TECHNICAL_CANCEL):
// "The result of the technical cancel request". Checkout API POST /cancels ("Cancel an
// authorised payment" by the payment's own merchant reference, for when its pspReference is not
// known, e.g. after a timeout): "You get the outcome of the request asynchronously, in a
// TECHNICAL_CANCEL webhook", where POST /payments/{pspReference}/cancels gets a CANCELLATION
// one. Both release an uncaptured authorisation (docs.adyen.com/online-payments/cancel). The
// /cancels answer's pspReference is "Adyen's 16-character reference associated with the cancel
// request", so the item's pspReference is not the payment: the payment is its
// originalReference, and without one only its merchant reference names it (not Complete).
//
// Input: a shop times out on /payments, cancels the authorisation by its reference; Adyen
// sends TECHNICAL_CANCEL success=true. Before the fix it was EVENT_TYPE_UNSUPPORTED: sinks
// never heard the authorisation was released, and the last thing they had for the payment was
// AUTHORIZATION_SUCCESS, for good. A failed one (success=false) leaves the payment as it was
// and stays unsupported, as a failed CANCELLATION does. Its id is unchanged
// (pspReference:TECHNICAL_CANCEL).
func TestTechnicalCancelIsACancellation(t *testing.T) {
	body := batch(signItem(testKey, "TCANCELREQ00AB24", "JVBXGSDM53RZNN82", "TECHNICAL_CANCEL", "true", "500", "EUR", ""))
	ev, err := connectors.HandleWith(context.Background(), adyen.New(), request(body), connectors.SecretsFromStrings(testKey), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != connectors.PaymentIntentCanceled || !ev.Complete || ev.Payment == nil ||
		ev.Payment.PaymentID != "JVBXGSDM53RZNN82" || ev.Payment.ConnectorTransactionID != "TCANCELREQ00AB24" ||
		ev.MerchantEventID != "TCANCELREQ00AB24:TECHNICAL_CANCEL" {
		t.Fatalf("TECHNICAL_CANCEL true: type %s complete %v id %q payment %+v; want PAYMENT_INTENT_CANCELED of JVBXGSDM53RZNN82",
			ev.Type, ev.Complete, ev.MerchantEventID, ev.Payment)
	}

	// No originalReference: the cancel request's pspReference is not passed off as the payment.
	body = batch(signItem(testKey, "TCANCELREQ01AB24", "", "TECHNICAL_CANCEL", "true", "500", "EUR", ""))
	ev, err = connectors.HandleWith(context.Background(), adyen.New(), request(body), connectors.SecretsFromStrings(testKey), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != connectors.PaymentIntentCanceled || ev.Complete || ev.Payment == nil || ev.Payment.PaymentID != "" ||
		ev.Payment.MerchantReference != "order-42" {
		t.Fatalf("TECHNICAL_CANCEL without originalReference: type %s complete %v payment %+v; want CANCELED, no payment id, reference order-42",
			ev.Type, ev.Complete, ev.Payment)
	}

	// Checked, holds: a failed technical cancel changes nothing.
	body = batch(signItem(testKey, "TCANCELREQ02AB24", "JVBXGSDM53RZNN82", "TECHNICAL_CANCEL", "false", "500", "EUR", ""))
	ev, err = connectors.HandleWith(context.Background(), adyen.New(), request(body), connectors.SecretsFromStrings(testKey), "", time.Now())
	if err != nil || ev.Type != connectors.EventTypeUnsupported || ev.Payment != nil {
		t.Fatalf("TECHNICAL_CANCEL false: %v, %+v; want EVENT_TYPE_UNSUPPORTED", err, ev)
	}
}

package checkout_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/checkout"
)

// A Checkout.com dispute left unanswered until its deadline is the dispute
// lost, not an event nothing maps.
//
// Checkout's event types (checkout.com/docs/reporting-and-insights/events-api/event-types):
// dispute_evidence_required "Notifies you that you need to respond to a dispute, and that your
// account has been debited the disputed amount"; dispute_expired "Notifies you that you can no
// longer respond to a dispute, because the time limit to take action has been exceeded". Nothing
// follows it for the merchant (dispute_lost is "the issuing bank has rejected your evidence",
// which an expired dispute never had): the debit stands for good. The Adyen connector maps its
// equivalent, DISPUTE_DEFENSE_PERIOD_ENDED ("You have not defended the dispute within the
// timeframe"), to DISPUTE_LOST for the same reason.
//
// Input: a merchant misses the evidence deadline of a chargeback; Checkout sends
// dispute_expired (signed, the dispute's usual data). Before the fix it was
// EVENT_TYPE_UNSUPPORTED: the last thing any sink heard of the dispute was DISPUTE_CREATED, for
// good, though it was over and lost; a sink filtered on DISPUTE_LOST never heard of it. Its id
// (evt_…) is unchanged.
func TestDisputeExpiredIsTheDisputeLost(t *testing.T) {
	const key = "adv24c-checkout-key"
	body := []byte(`{"id":"evt_adv24cexpired0000000000000","type":"dispute_expired",` +
		`"created_on":"2025-12-15T15:20:32.582+00:00","version":"1.0.0","data":{"id":"dsp_9rjdlsd4epepfjyyf9vl",` +
		`"date":"2022-12-15T15:20:31.5042702+00:00","category":"fraudulent","amount":8150,"currency":"GBP",` +
		`"reason_code":"10.4","payment_id":"pay_cnhuomagalglgozxy5zm","payment_action_id":"act_7B15779D173D0W45700D",` +
		`"payment_reference":"Disputes QA","payment_method":"VISA"}}`)
	ev, err := connectors.HandleWith(context.Background(), checkout.New(), request(sign(key, body), body),
		connectors.SecretsFromStrings(key), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != connectors.DisputeLost || !ev.Complete || ev.Dispute == nil || ev.Dispute.DisputeID != "dsp_9rjdlsd4epepfjyyf9vl" ||
		ev.Dispute.PaymentID != "pay_cnhuomagalglgozxy5zm" || ev.Dispute.AmountMinor != 8150 ||
		ev.MerchantEventID != "evt_adv24cexpired0000000000000" {
		t.Fatalf("dispute_expired: type %s complete %v id %q dispute %+v; want DISPUTE_LOST with the dispute's details",
			ev.Type, ev.Complete, ev.MerchantEventID, ev.Dispute)
	}
}

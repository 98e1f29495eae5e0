package checkout_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/checkout"
)

// The outcome of a Checkout.com dispute arbitration is the dispute's outcome.
//
// Checkout's dispute flow: dispute_evidence_required (CREATED), dispute_lost (LOST), and, when
// the merchant takes the case to arbitration, dispute_arbitration_evidence_submitted ("occurs
// when you submit evidence to support an arbitration", mapped CHALLENGED here) followed by
// dispute_arbitration_won or dispute_arbitration_lost ("occurs when you lose an arbitration.
// Your account is debited any additional arbitration-related fees";
// checkout.com/docs/developer-resources/event-notifications/event-types/dispute_arbitration_lost,
// .../workflows/webhook-event-types/dispute_arbitration_won, whose documented examples are the
// bodies below).
//
// Input: a merchant escalates a lost dispute to arbitration and the scheme rules. Before the
// fix the ruling was EVENT_TYPE_UNSUPPORTED, while the arbitration evidence before it was
// DISPUTE_CHALLENGED: the last mapped state every sink ever saw for the dispute was "under
// review", for good, and a sink filtered on DISPUTE_WON or DISPUTE_LOST never heard of the
// final outcome (nor of the arbitration fees debited with a loss). Now the ruling is
// DISPUTE_WON / DISPUTE_LOST with the dispute's details, like dispute_won / dispute_lost.
func TestArbitrationOutcomeIsTheDisputesOutcome(t *testing.T) {
	const key = "adv23-checkout-key"
	for _, tt := range []struct {
		name, body string
		want       connectors.EventType
		amount     int64
	}{
		{"dispute_arbitration_lost", `{"id":"evt_3sje5vlx4xyerastskmavurofa","type":"dispute_arbitration_lost",` +
			`"created_on":"2025-12-15T15:20:32.582+00:00","version":"1.2.0","data":{"id":"dsp_9rjdlsd4epepfjyyf9vl",` +
			`"date":"2022-12-15T15:20:31.5042702+00:00","category":"fraudulent","amount":8150,"currency":"GBP",` +
			`"reason_code":"10.4","payment_id":"pay_cnhuomagalglgozxy5zm","payment_action_id":"act_7B15779D173D0W45700D",` +
			`"payment_reference":"Disputes QA","payment_method":"VISA","client_id":"cli_rfj4yr43ivge3jo3n22x3hgiei",` +
			`"processing_channel_id":"c_ozdhi2aysxjebj6kumgzyrbo24","entity_id":"ent_3heic3vsec6urkmvnm7uwcqr5m"}}`,
			connectors.DisputeLost, 8150},
		{"dispute_arbitration_won", `{"id":"evt_b6anegml5j6u7kwzuzdg6r4sem","type":"dispute_arbitration_won",` +
			`"created_on":"2018-06-21T12:00:31Z","data":{"id":"dsp_9rjdlsd4epepfjyyf9vl","date":"2018-07-06T11:19:20Z",` +
			`"category":"canceled_recurring","amount":20020,"currency":"USD","reason_code":"10.4",` +
			`"payment_id":"pay_cnhuomagalglgozxy5zm","payment_action_id":"act_7B15779D173D0W45700D",` +
			`"payment_reference":"some-company-ref","payment_method":"Visa"}}`,
			connectors.DisputeWon, 20020},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			ev, err := connectors.HandleWith(context.Background(), checkout.New(), request(sign(key, body), body),
				connectors.SecretsFromStrings(key), "", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != tt.want || !ev.Complete || ev.Dispute == nil || ev.Dispute.DisputeID != "dsp_9rjdlsd4epepfjyyf9vl" ||
				ev.Dispute.PaymentID != "pay_cnhuomagalglgozxy5zm" || ev.Dispute.AmountMinor != tt.amount || ev.ConnectorEventType != tt.name {
				t.Fatalf("%s: type %s complete %v dispute %+v; want %s with the dispute's details", tt.name, ev.Type, ev.Complete, ev.Dispute, tt.want)
			}
		})
	}
}

package adyen_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/adyen"
)

// CHARGEBACK_REVERSED with additionalData.disputeStatus "Pending" is not a dispute won.
//
// Adyen's webhook reference, CHARGEBACK_REVERSED ("Chargeback successfully defended",
// docs.adyen.com/api-explorer/Webhooks/1/post/CHARGEBACK_REVERSED): "The chargeback was
// successfully defended towards the issuing bank. This stage is not final. If the issuing bank
// presents a second chargeback, you can still lose the chargeback case." Adyen's dispute
// webhooks table (docs.adyen.com/risk-management/disputes-api/dispute-notifications) gives
// CHARGEBACK_REVERSED two statuses, Pending and Won: Adyen itself says the reversal it sends
// with Pending is not yet won. DISPUTE_WON in this model means "the dispute was decided for
// the merchant" (connectors/event.go).
//
// Input: a merchant defends a chargeback; Adyen sends CHARGEBACK_REVERSED disputeStatus
// Pending (signed, one item, as Adyen recommends). Weeks later the issuer declines the
// defence and Adyen sends SECOND_CHARGEBACK (disputeStatus Lost). Before the fix the first was
// normalized DISPUTE_WON: every sink (and a filter on DISPUTE_WON, which is how a merchant
// would close a case or restore a customer flagged for the chargeback) was told the dispute
// was decided for the merchant, then told it was lost. Pending is a dispute still open with
// the merchant's defence accepted for now: DISPUTE_CHALLENGED, with status "Pending" in the
// details. CHARGEBACK_REVERSED with Won, and without a status (Brazil, where Adyen sends
// none: nothing tells a pending reversal from a final one), stay DISPUTE_WON as before; ids are
// unchanged (the status was already part of them: parse_dispute_id_test.go).
func TestChargebackReversedPendingIsNotADisputeWon(t *testing.T) {
	handle := func(code, extra string) *connectors.Event {
		t.Helper()
		body := batch(signItem(testKey, "RVRSDPND0000AB12", "JVBXGSDM53RZNN82", code, "true", "500", "EUR", extra))
		ev, err := connectors.HandleWith(context.Background(), adyen.New(), request(body),
			connectors.SecretsFromStrings(testKey), "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	for _, tc := range []struct {
		name, code, extra string
		want              connectors.EventType
		id, status        string
	}{
		{"reversal pending", "CHARGEBACK_REVERSED", `,"disputeStatus":"Pending"`, connectors.DisputeChallenged,
			"RVRSDPND0000AB12:CHARGEBACK_REVERSED:Pending", "Pending"},
		{"reversal won", "CHARGEBACK_REVERSED", `,"disputeStatus":"Won"`, connectors.DisputeWon,
			"RVRSDPND0000AB12:CHARGEBACK_REVERSED:Won", "Won"},
		// Checked, holds: Brazil sends no disputeStatus; the reversal keeps its type and id.
		{"reversal without a status (Brazil)", "CHARGEBACK_REVERSED", ``, connectors.DisputeWon,
			"RVRSDPND0000AB12:CHARGEBACK_REVERSED", "success"},
		// Checked, holds: the second chargeback that may follow a pending reversal is the loss.
		{"second chargeback", "SECOND_CHARGEBACK", `,"disputeStatus":"Lost"`, connectors.DisputeLost,
			"RVRSDPND0000AB12:SECOND_CHARGEBACK:Lost", "Lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := handle(tc.code, tc.extra)
			if ev.Type != tc.want || ev.MerchantEventID != tc.id || !ev.Complete || ev.Dispute == nil ||
				ev.Dispute.Status != tc.status || ev.Dispute.DisputeID != "RVRSDPND0000AB12" || ev.Dispute.PaymentID != "JVBXGSDM53RZNN82" {
				t.Fatalf("%s %s: type %s id %q complete %v dispute %+v; want %s id %q status %q",
					tc.code, tc.extra, ev.Type, ev.MerchantEventID, ev.Complete, ev.Dispute, tc.want, tc.id, tc.status)
			}
		})
	}
}

// The scheme's arbitration ruling is the dispute's outcome.
//
// Adyen's webhook reference: SCHEME_ARBITRATION_WON "The pre-arbitration case was escalated to
// scheme arbitration, and the case was won. The payment scheme has ruled that the issuer is
// liable for the dispute. The dispute is closed."; SCHEME_ARBITRATION_LOST "... the case was
// lost. The payment scheme has ruled that you are liable for the dispute."
// (docs.adyen.com/api-explorer/Webhooks/1/post/SCHEME_ARBITRATION_WON, ..._LOST). The stages
// before them are mapped: PREARBITRATION_WON → WON, PREARBITRATION_LOST → LOST.
//
// Input: a pre-arbitration the merchant lost (PREARBITRATION_LOST, DISPUTE_LOST) is escalated
// to the scheme, which rules for the merchant. Before the fix SCHEME_ARBITRATION_WON was
// EVENT_TYPE_UNSUPPORTED: the last outcome any sink saw was DISPUTE_LOST, for good, though the
// scheme ruled the issuer liable and closed the dispute; likewise a final loss after a won
// pre-arbitration stayed DISPUTE_WON. Now the ruling is DISPUTE_WON / DISPUTE_LOST.
func TestSchemeArbitrationRulingIsTheDisputesOutcome(t *testing.T) {
	for _, tc := range []struct {
		code string
		want connectors.EventType
	}{
		{"SCHEME_ARBITRATION_WON", connectors.DisputeWon},
		{"SCHEME_ARBITRATION_LOST", connectors.DisputeLost},
	} {
		body := batch(signItem(testKey, "ARBTRTN000000A23", "JVBXGSDM53RZNN82", tc.code, "true", "500", "EUR", ""))
		ev, err := connectors.HandleWith(context.Background(), adyen.New(), request(body),
			connectors.SecretsFromStrings(testKey), "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != tc.want || !ev.Complete || ev.Dispute == nil || ev.Dispute.DisputeID != "ARBTRTN000000A23" ||
			ev.Dispute.PaymentID != "JVBXGSDM53RZNN82" || ev.MerchantEventID != "ARBTRTN000000A23:"+tc.code {
			t.Errorf("%s: type %s id %q dispute %+v; want %s", tc.code, ev.Type, ev.MerchantEventID, ev.Dispute, tc.want)
		}
	}
}

package adyen_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/adyen"
)

// The end of a dispute's defence or of the issuer's response
// time is the dispute's outcome, not an event nothing maps.
//
// Adyen's webhook reference (both are dispute webhooks of the standard webhook, sent with the
// dispute's pspReference like every other dispute event):
//   - ISSUER_RESPONSE_TIMEFRAME_EXPIRED, "Issuer accepted defense or did not respond": "The
//     issuer accepted your defense of the dispute or did not respond in time."
//     (docs.adyen.com/api-explorer/Webhooks/1/post/ISSUER_RESPONSE_TIMEFRAME_EXPIRED) — the
//     merchant's defence stands: the dispute is decided for the merchant, DISPUTE_WON (as
//     PREARBITRATION_WON, SCHEME_ARBITRATION_WON).
//   - DISPUTE_DEFENSE_PERIOD_ENDED, "Dispute defense period ended": "You have not defended the
//     dispute within the timeframe, or the defense period ended because you accepted liability
//     for the chargeback and will not defend the dispute."
//     (docs.adyen.com/api-explorer/Webhooks/1/post/DISPUTE_DEFENSE_PERIOD_ENDED) — the chargeback
//     debit stands for good: DISPUTE_LOST; with disputeStatus Accepted (the merchant accepted
//     liability) DISPUTE_ACCEPTED, as CHARGEBACK Accepted already is. With disputeStatus Pending
//     (a defence is under review, which the reference says this event is not sent for) nothing is
//     concluded: it stays EVENT_TYPE_UNSUPPORTED rather than a guess.
//
// Input: a merchant defends a chargeback and the issuer lets its response time run out; Adyen
// sends ISSUER_RESPONSE_TIMEFRAME_EXPIRED (signed, one item). Another chargeback is left
// undefended; Adyen sends DISPUTE_DEFENSE_PERIOD_ENDED disputeStatus Undefended. Before the fix
// both were EVENT_TYPE_UNSUPPORTED: the last thing any sink heard of the first dispute was
// DISPUTE_CHALLENGED (INFORMATION_SUPPLIED) or DISPUTE_CREATED, for good, though it was over and
// won; the second stayed "opened" for good though it was lost. Ids are unchanged.
func TestDefencePeriodAndIssuerTimeframeEndAreOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name, code, extra string
		want              connectors.EventType
		id                string
	}{
		{"issuer timeframe expired", "ISSUER_RESPONSE_TIMEFRAME_EXPIRED", `,"disputeStatus":"Pending"`, connectors.DisputeWon,
			"DFNCPRD00000AB24:ISSUER_RESPONSE_TIMEFRAME_EXPIRED:Pending"},
		{"issuer timeframe expired, no status (Brazil)", "ISSUER_RESPONSE_TIMEFRAME_EXPIRED", ``, connectors.DisputeWon,
			"DFNCPRD00000AB24:ISSUER_RESPONSE_TIMEFRAME_EXPIRED"},
		{"defence period ended, undefended", "DISPUTE_DEFENSE_PERIOD_ENDED", `,"disputeStatus":"Undefended"`, connectors.DisputeLost,
			"DFNCPRD00000AB24:DISPUTE_DEFENSE_PERIOD_ENDED:Undefended"},
		{"defence period ended, no status (Brazil)", "DISPUTE_DEFENSE_PERIOD_ENDED", ``, connectors.DisputeLost,
			"DFNCPRD00000AB24:DISPUTE_DEFENSE_PERIOD_ENDED"},
		{"defence period ended, liability accepted", "DISPUTE_DEFENSE_PERIOD_ENDED", `,"disputeStatus":"Accepted"`, connectors.DisputeAccepted,
			"DFNCPRD00000AB24:DISPUTE_DEFENSE_PERIOD_ENDED:Accepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := batch(signItem(testKey, "DFNCPRD00000AB24", "JVBXGSDM53RZNN82", tc.code, "true", "500", "EUR", tc.extra))
			ev, err := connectors.HandleWith(context.Background(), adyen.New(), request(body),
				connectors.SecretsFromStrings(testKey), "", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != tc.want || ev.MerchantEventID != tc.id || !ev.Complete || ev.Dispute == nil ||
				ev.Dispute.DisputeID != "DFNCPRD00000AB24" || ev.Dispute.PaymentID != "JVBXGSDM53RZNN82" || ev.Dispute.AmountMinor != 500 {
				t.Fatalf("%s %s: type %s id %q complete %v dispute %+v; want %s id %q",
					tc.code, tc.extra, ev.Type, ev.MerchantEventID, ev.Complete, ev.Dispute, tc.want, tc.id)
			}
		})
	}
	// Checked, holds: a defence period that ends with a defence under review concludes nothing.
	body := batch(signItem(testKey, "DFNCPRD00000AB24", "JVBXGSDM53RZNN82", "DISPUTE_DEFENSE_PERIOD_ENDED", "true", "500", "EUR", `,"disputeStatus":"Pending"`))
	ev, err := connectors.HandleWith(context.Background(), adyen.New(), request(body), connectors.SecretsFromStrings(testKey), "", time.Now())
	if err != nil || ev.Type != connectors.EventTypeUnsupported || ev.Dispute != nil {
		t.Fatalf("DISPUTE_DEFENSE_PERIOD_ENDED Pending: %v, %+v; want EVENT_TYPE_UNSUPPORTED", err, ev)
	}
}

// Checked, holds: a CHARGEBACK that follows a
// NOTIFICATION_OF_CHARGEBACK is DISPUTE_CREATED again, under its own id and the same DisputeID.
//
// Adyen (support.adyen.com article 360002165470, "We received a Notification of Chargeback and a
// Chargeback on the same transaction"): the NoC is sent "as soon as we know that a dispute has
// been filed"; "The Chargeback event that follows (or sometimes occurs on the same day as the
// Notification of Chargeback) is the actual debit". So it is the same dispute advancing, not a new
// one (Adyen's dispute webhooks page: "All events related to a dispute have the same PSP
// reference"). But one item does not say whether a NoC came before it: Adyen's own older manual
// says CHARGEBACK "is not sent if a REQUEST_FOR_INFORMATION or NOTIFICATION_OF_CHARGEBACK
// notification has already been sent" (the CHARGEBACK is then the only opening a merchant gets),
// and after an RFI "a chargeback may take place" (dispute-process-and-flow). Made anything but
// DISPUTE_CREATED, a dispute opened by its CHARGEBACK alone would never be reported opened.
// The connector is stateless, so the sink sees two DISPUTE_CREATED (and the PaymentEvent
// controller two "Dispute … opened" Warnings) that name the same dispute id and the same payment:
// a sink keys disputes on DisputeID. No points move on payment events. Not changed.
func TestChargebackAfterNoticeIsTheSameDispute(t *testing.T) {
	var ids []string
	for _, tc := range []struct{ code, extra string }{
		{"NOTIFICATION_OF_CHARGEBACK", `,"disputeStatus":"Undefended"`},
		{"CHARGEBACK", `,"disputeStatus":"Undefended"`},
	} {
		body := batch(signItem(testKey, "NOCTHENCB000AB24", "JVBXGSDM53RZNN82", tc.code, "true", "500", "EUR", tc.extra))
		ev, err := connectors.HandleWith(context.Background(), adyen.New(), request(body), connectors.SecretsFromStrings(testKey), "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != connectors.DisputeCreated || ev.Dispute == nil || ev.Dispute.DisputeID != "NOCTHENCB000AB24" ||
			ev.Dispute.PaymentID != "JVBXGSDM53RZNN82" {
			t.Fatalf("%s: type %s dispute %+v; want DISPUTE_CREATED of dispute NOCTHENCB000AB24", tc.code, ev.Type, ev.Dispute)
		}
		ids = append(ids, ev.MerchantEventID)
	}
	if ids[0] == ids[1] {
		t.Fatalf("NoC and CHARGEBACK share id %q: the debit would be refused as a conflicting redelivery", ids[0])
	}
}

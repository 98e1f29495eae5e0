package adyen_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/adyen"
)

// A REQUEST_FOR_INFORMATION whose disputeStatus is Responded or
// Expired is not a dispute opened.
//
// Adyen's dispute webhooks table (docs.adyen.com/risk-management/disputes-api/dispute-notifications)
// gives REQUEST_FOR_INFORMATION ("Information requested for this payment") three statuses:
// Unresponded, Responded, Expired; disputeStatus is "the status of the dispute at the time of the
// event", and "all events related to a dispute have the same PSP reference". Adyen's dispute flow
// (docs.adyen.com/risk-management/understanding-disputes/dispute-process-and-flow): "Request for
// Information (RFI) - The issuer requests more information about the transaction. At this stage,
// no money is withdrawn from your account. However, if you do not respond to the RFI in a timely
// manner, a chargeback may take place" — which Adyen then sends as NOTIFICATION_OF_CHARGEBACK /
// CHARGEBACK ("The NoC may follow a RFI"), another eventCode. So:
//   - Unresponded (or no status, Brazil): the issuer's inquiry is open → DISPUTE_CREATED, as before;
//   - Responded: the merchant supplied the information, the inquiry is under the issuer's review —
//     what INFORMATION_SUPPLIED already maps to, and what Stripe's warning_under_review and
//     Square's INQUIRY_PROCESSING map to: DISPUTE_CHALLENGED;
//   - Expired: the RFI's response period is over; the inquiry stage ended without a won/lost ruling
//     (any chargeback comes as its own event) — what Stripe's warning_closed and Square's
//     INQUIRY_CLOSED map to: DISPUTE_CLOSED ("the dispute ended without a won/lost outcome we can
//     tell (inquiry closed, ...)", connectors/event.go).
//
// Input: Adyen sends REQUEST_FOR_INFORMATION Unresponded, the merchant uploads the transaction
// receipt, Adyen sends REQUEST_FOR_INFORMATION Responded; (another dispute) the RFI runs out and
// Adyen sends REQUEST_FOR_INFORMATION Expired. Each is signed, one item, as Adyen sends them.
// Before the fix every one was DISPUTE_CREATED: a sink was told three times that a dispute was
// opened, never that the merchant had answered or that the inquiry was over, and a sink that opens
// a case (or flags the customer) per DISPUTE_CREATED opened a second and third case for one RFI.
// Ids are unchanged (the status is part of them: parse_dispute_id_test.go).
func TestRequestForInformationRespondedOrExpiredIsNotADisputeOpened(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		want        connectors.EventType
		id, status  string
	}{
		{"responded", `,"disputeStatus":"Responded"`, connectors.DisputeChallenged,
			"RFIRSPND0000AB24:REQUEST_FOR_INFORMATION:Responded", "Responded"},
		{"expired", `,"disputeStatus":"Expired"`, connectors.DisputeClosed,
			"RFIRSPND0000AB24:REQUEST_FOR_INFORMATION:Expired", "Expired"},
		// Checked, holds: the RFI opened, with its status or without one (Brazil).
		{"unresponded", `,"disputeStatus":"Unresponded"`, connectors.DisputeCreated,
			"RFIRSPND0000AB24:REQUEST_FOR_INFORMATION:Unresponded", "Unresponded"},
		{"no status (Brazil)", ``, connectors.DisputeCreated,
			"RFIRSPND0000AB24:REQUEST_FOR_INFORMATION", "success"},
		// Checked, holds: a status Adyen does not document for an RFI (additionalData is not
		// signed) is no outcome of it: the RFI stays opened (the id keeps the status, a
		// documented one, as parse_dispute_id_test.go pins).
		{"made-up status", `,"disputeStatus":"Won"`, connectors.DisputeCreated,
			"RFIRSPND0000AB24:REQUEST_FOR_INFORMATION:Won", "Won"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := batch(signItem(testKey, "RFIRSPND0000AB24", "JVBXGSDM53RZNN82", "REQUEST_FOR_INFORMATION", "true", "500", "EUR", tc.extra))
			ev, err := connectors.HandleWith(context.Background(), adyen.New(), request(body),
				connectors.SecretsFromStrings(testKey), "", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != tc.want || ev.MerchantEventID != tc.id || !ev.Complete || ev.Dispute == nil ||
				ev.Dispute.Status != tc.status || ev.Dispute.DisputeID != "RFIRSPND0000AB24" || ev.Dispute.PaymentID != "JVBXGSDM53RZNN82" {
				t.Fatalf("REQUEST_FOR_INFORMATION %s: type %s id %q complete %v dispute %+v; want %s id %q status %q",
					tc.extra, ev.Type, ev.MerchantEventID, ev.Complete, ev.Dispute, tc.want, tc.id, tc.status)
			}
		})
	}
}

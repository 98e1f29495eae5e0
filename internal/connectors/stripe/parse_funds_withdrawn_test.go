package stripe_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/stripe"
)

// A Stripe inquiry that escalates to a chargeback was never told to a sink.
//
// Stripe (docs.stripe.com/disputes/how-disputes-work, "Inquiries"; the Dispute object's
// status): an inquiry is a Dispute in warning_needs_response / warning_under_review /
// warning_closed, and no funds are withdrawn. If the issuer escalates it, the same Dispute moves
// to needs_response, the funds are withdrawn, and Stripe sends charge.dispute.funds_withdrawn
// ("Occurs when funds are removed from your account due to a dispute"; data.object is the
// Dispute). An ordinary chargeback sends it too, right after its charge.dispute.created.
//
// Input: testdata/charge_dispute_created.json (the API reference's inquiry, warning_needs_response)
// escalated: testdata/charge_dispute_funds_withdrawn.json, the same dispute in needs_response
// with its withdrawal, signed. Before the fix it was EVENT_TYPE_UNSUPPORTED with no dispute
// (charge.dispute.updated needs_response is unsupported too: an evidence save sends it), so a
// sink heard of the inquiry and never that money was taken back. It is DISPUTE_CREATED, with
// the dispute read as the other charge.dispute.* events read it.
func TestFundsWithdrawnOpensTheChargeback(t *testing.T) {
	const secret = "whsec_adv26"
	body, err := os.ReadFile("testdata/charge_dispute_funds_withdrawn.json")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1681861340, 0)
	ev, err := connectors.HandleWith(context.Background(), stripe.New(),
		request(sign(secret, 1681861338, body), body), connectors.SecretsFromStrings(secret), "", now)
	if err != nil {
		t.Fatal(err)
	}
	want := connectors.DisputeDetails{DisputeID: "du_1MtJUT2eZvKYlo2CNaw2HvEv", PaymentID: "ch_1AZtxr2eZvKYlo2CJDX8whov",
		ConnectorTransactionID: "ch_1AZtxr2eZvKYlo2CJDX8whov", AmountMinor: 1000, Currency: "USD",
		Status: "needs_response", Reason: "general", CreatedAt: time.Unix(1680651737, 0).UTC()}
	if ev.Type != connectors.DisputeCreated || ev.ConnectorEventType != "charge.dispute.funds_withdrawn" ||
		ev.MerchantEventID != "evt_1MtKqW2eZvKYlo2CnGfLbB3x" || !ev.Complete || ev.Dispute == nil || *ev.Dispute != want {
		t.Fatalf("event = %+v\ndispute = %+v\nwant DISPUTE_CREATED with %+v", ev, ev.Dispute, want)
	}

	// Checked, holds: the inquiry's own opening is DISPUTE_CREATED under the same dispute id,
	// with its warning_ status (which the PaymentEvent controller counts as an inquiry).
	inq, err := os.ReadFile("testdata/charge_dispute_created.json")
	if err != nil {
		t.Fatal(err)
	}
	first, err := stripe.New().Parse(&connectors.Request{Body: inq})
	if err != nil {
		t.Fatal(err)
	}
	if first.Type != connectors.DisputeCreated || first.Dispute.DisputeID != want.DisputeID || first.Dispute.Status != "warning_needs_response" {
		t.Fatalf("inquiry = %+v\ndispute = %+v", first, first.Dispute)
	}
}

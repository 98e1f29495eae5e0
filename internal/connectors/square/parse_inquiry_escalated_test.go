package square_test

import (
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/square"
)

// A Square inquiry that escalates to a chargeback is the chargeback opened, not
// an event nothing maps.
//
// Square's DisputeState enum (square/square-python-sdk doc/models/dispute-state.md, the
// DisputeState reference): INQUIRY_EVIDENCE_REQUIRED "The initial state of an inquiry with
// evidence required", INQUIRY_PROCESSING, INQUIRY_CLOSED; EVIDENCE_REQUIRED "The initial state
// of a dispute with evidence required". An open inquiry that escalates stays on the same Dispute
// object: "The id doesn't change, and you receive a dispute.state.updated webhook rather than a
// new dispute.created", its state moving to a chargeback state (Square's developer forum,
// "Disputes API: does an inquiry that escalates to a chargeback keep the same dispute ID?",
// developer.squareup.com/forums/t/28718).
//
// Input: a cardholder's bank sends an inquiry (dispute.created, INQUIRY_EVIDENCE_REQUIRED),
// then files the chargeback: dispute.state.updated with state EVIDENCE_REQUIRED, same dispute id,
// signed. Before the fix the second was EVENT_TYPE_UNSUPPORTED ("a move back to
// EVIDENCE_REQUIRED stays unsupported"): the moment money is taken and the evidence deadline
// starts was no DISPUTE_CREATED, so no Warning and no sink filtered on DISPUTE_CREATED heard of
// it; the last thing they knew was an inquiry. Now it is DISPUTE_CREATED with the dispute's
// details and state EVIDENCE_REQUIRED (the controller warns again for it: the earlier opening
// was an inquiry).
func TestSquareInquiryEscalatedToChargebackIsADisputeOpened(t *testing.T) {
	inquiry, err := square.New().Parse(&connectors.Request{Body: []byte(disputeEvent("dispute.created", "INQUIRY_EVIDENCE_REQUIRED"))})
	if err != nil || inquiry.Type != connectors.DisputeCreated {
		t.Fatalf("the inquiry: %v, %+v; want DISPUTE_CREATED", err, inquiry)
	}
	ev, err := square.New().Parse(&connectors.Request{Body: []byte(disputeEvent("dispute.state.updated", "EVIDENCE_REQUIRED"))})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != connectors.DisputeCreated || ev.Dispute == nil || ev.Dispute.DisputeID != inquiry.Dispute.DisputeID ||
		ev.Dispute.Status != "EVIDENCE_REQUIRED" || ev.Dispute.AmountMinor != 8801 || ev.Dispute.Currency != "USD" ||
		ev.Dispute.PaymentID != "fbmsaEOpoARDKxiSGH1fqPuqoqFZY" {
		t.Fatalf("the escalation: type %s dispute %+v; want DISPUTE_CREATED of the same dispute, state EVIDENCE_REQUIRED", ev.Type, ev.Dispute)
	}
}

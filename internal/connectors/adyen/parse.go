package adyen

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/internal/norm"
)

// Parse implements connectors.Connector. A notification with one item
// yields that item's event. With several items, the returned event
// describes the first item and Items holds all of them in order.
func (c *Connector) Parse(req *connectors.Request) (*connectors.Event, error) {
	items, err := decode(req.Body)
	if err != nil {
		return nil, err
	}
	events := make([]connectors.Event, len(items))
	for i := range items {
		ev, err := toEvent(&items[i])
		if err != nil {
			return nil, err
		}
		events[i] = ev
	}
	first := events[0]
	if len(events) > 1 {
		first.Items = events
	}
	return &first, nil
}

func toEvent(it *item) (connectors.Event, error) {
	ev := connectors.Event{
		Type:               connectors.EventTypeUnsupported,
		ConnectorEventType: it.EventCode,
		OccurredAt:         norm.Time(it.EventDate),
	}
	if it.PSPReference != "" {
		ev.MerchantEventID = pspEventID(it)
	} else {
		// Without one, only the signed fields may say which event this is: a
		// hash of the body would make a resend with an unsigned field changed
		// (eventDate, reason, additionalData) a second event.
		sum := sha256.Sum256([]byte(it.signingString()))
		ev.MerchantEventID = "signed:sha256:" + hex.EncodeToString(sum[:])
	}
	var amount int64
	if v := it.Amount.Value.String(); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return ev, parseErr(err)
		}
		amount = n
	}
	success := it.Success == "true"
	status := "failed"
	if success {
		status = "success"
	}
	kind, t := classify(it, success)
	switch kind {
	case kindPayment:
		ev.Type = t
		ev.Payment = &connectors.PaymentDetails{
			PaymentID:              it.PSPReference,
			ConnectorTransactionID: it.PSPReference,
			MerchantReference:      it.MerchantReference,
			AmountMinor:            amount,
			Currency:               norm.Currency(it.Amount.Currency),
			Status:                 status,
			Reason:                 it.Reason,
		}
		// Modifications (capture, cancel) reference the payment they act on. A technical
		// cancel's own pspReference is the cancel request's, never the payment's: without an
		// originalReference the payment is named only by the merchant's reference.
		if it.OriginalReference != "" || it.EventCode == "TECHNICAL_CANCEL" {
			ev.Payment.PaymentID = it.OriginalReference
		}
	case kindRefund:
		ev.Type = t
		ev.Refund = &connectors.RefundDetails{
			RefundID:               it.PSPReference,
			PaymentID:              it.OriginalReference,
			ConnectorTransactionID: it.PSPReference,
			MerchantReference:      it.MerchantReference,
			AmountMinor:            amount,
			Currency:               norm.Currency(it.Amount.Currency),
			Status:                 status,
			Reason:                 it.Reason,
		}
	case kindDispute:
		ev.Type = t
		ev.Dispute = &connectors.DisputeDetails{
			DisputeID:              it.PSPReference,
			PaymentID:              it.OriginalReference,
			ConnectorTransactionID: it.PSPReference,
			MerchantReference:      it.MerchantReference,
			AmountMinor:            amount,
			Currency:               norm.Currency(it.Amount.Currency),
			Status:                 it.additionalString("disputeStatus"),
			Reason:                 it.Reason,
		}
		if ev.Dispute.Status == "" {
			ev.Dispute.Status = status
		}
	}
	return ev, nil
}

// pspEventID is the id of an item with a pspReference: "pspReference:eventCode" when success
// is "true", "pspReference:eventCode:<success>" otherwise (…:false), then ":<disputeStatus>"
// when additionalData has one. pspReference alone repeats across a payment's events
// (AUTHORISATION then CAPTURE with the same reference), hence the code; and Adyen may send the
// same eventCode for the same pspReference again with a different (signed) success when the
// outcome changes, e.g. a refused AUTHORISATION followed by a successful one: that is a new
// event, not a redelivery, hence the outcome. Successful items keep the id they had before the
// outcome was part of it, so an item stored then and resent now is still a duplicate, not a
// second event that moves money twice.
//
// Every notification of a dispute carries the dispute's pspReference, and one eventCode may
// come again with another disputeStatus, the dispute's status at the time of the event
// (docs.adyen.com/risk-management/disputes-api/dispute-notifications: CHARGEBACK Undefended,
// Pending, Lost or Accepted; CHARGEBACK_REVERSED Pending or Won; REQUEST_FOR_INFORMATION
// Unresponded, Responded or Expired): CHARGEBACK Pending then CHARGEBACK Lost is the dispute
// lost, not a redelivery, hence the status. Adyen's retries resend an item as it was, status
// included, so they keep its id. Items without a disputeStatus (payments, refunds, disputes
// processed in Brazil) keep their id. Upgrade effect: a dispute item stored before the status
// was part of its id and delivered again after (its 2xx was lost, or it was resent from the
// Customer Area) is stored once more under the new id; sinks get it a second time. PaymentEvents
// move no points, and the outcomes that were refused with 409 before are stored on their next
// retry.
//
// additionalData is not signed: anyone holding one signed item could resend it with another
// disputeStatus. Only the statuses Adyen documents count, so such a resend makes at most one
// object per status (a handful), not one per made-up value; an item with another status keeps
// the id without one, as before (a second such item of the code is a 409 again).
func pspEventID(it *item) string {
	id := it.PSPReference + ":" + it.EventCode
	if it.Success != "true" {
		id += ":" + string(it.Success)
	}
	if status := it.additionalString("disputeStatus"); disputeStatuses[status] {
		id += ":" + status
	}
	return id
}

// disputeStatuses are the disputeStatus values Adyen documents for its dispute notifications.
var disputeStatuses = map[string]bool{
	"Undefended": true, "Pending": true, "Lost": true, "Accepted": true, "Won": true,
	"Unresponded": true, "Responded": true, "Expired": true,
}

type kind int

const (
	kindNone kind = iota
	kindPayment
	kindRefund
	kindDispute
)

// classify maps eventCode (https://docs.adyen.com/development-resources/webhooks/webhook-types)
// and success onto the shared types.
func classify(it *item, success bool) (kind, connectors.EventType) {
	switch it.EventCode {
	case "AUTHORISATION":
		if success {
			return kindPayment, connectors.PaymentIntentAuthorizationSuccess
		}
		return kindPayment, connectors.PaymentIntentAuthorizationFailure
	case "CAPTURE":
		if success {
			return kindPayment, connectors.PaymentIntentCaptureSuccess
		}
		return kindPayment, connectors.PaymentIntentCaptureFailure
	case "CAPTURE_FAILED":
		return kindPayment, connectors.PaymentIntentCaptureFailure
	case "CANCELLATION":
		// A failed cancellation leaves the payment as it was: nothing to map.
		if success {
			return kindPayment, connectors.PaymentIntentCanceled
		}
	case "TECHNICAL_CANCEL":
		// "The result of the technical cancel request" (Adyen's webhook reference,
		// docs.adyen.com/api-explorer/Webhooks/1/post/TECHNICAL_CANCEL): the outcome of a
		// cancel made by the payment's merchant reference instead of its pspReference
		// (POST /cancels: "You get the outcome of the request asynchronously, in a
		// TECHNICAL_CANCEL webhook"). Successful, the authorisation is cancelled, as with
		// CANCELLATION; failed, the payment is as it was.
		if success {
			return kindPayment, connectors.PaymentIntentCanceled
		}
	case "CANCEL_OR_REFUND":
		if !success {
			break
		}
		switch it.additionalString("modification.action") {
		case "cancel":
			return kindPayment, connectors.PaymentIntentCanceled
		case "refund":
			return kindRefund, connectors.ChargeRefunded
		}
	case "REFUND":
		if success {
			return kindRefund, connectors.ChargeRefunded
		}
		return kindRefund, connectors.RefundFailure
	case "REFUND_FAILED", "REFUNDED_REVERSED":
		return kindRefund, connectors.RefundFailure
	case "NOTIFICATION_OF_CHARGEBACK":
		return kindDispute, connectors.DisputeCreated
	case "REQUEST_FOR_INFORMATION":
		// The issuer's inquiry, sent again as its status changes (Adyen's dispute webhooks
		// table: Unresponded, Responded, Expired). Responded: the merchant supplied the
		// information, under the issuer's review. Expired: the RFI's response period is over
		// without a ruling; a chargeback that follows comes as its own eventCode.
		switch it.additionalString("disputeStatus") {
		case "Responded":
			return kindDispute, connectors.DisputeChallenged
		case "Expired":
			return kindDispute, connectors.DisputeClosed
		}
		return kindDispute, connectors.DisputeCreated
	case "CHARGEBACK":
		// Funds are debited when a chargeback is booked; the dispute's
		// outcome is in additionalData.disputeStatus when it is known.
		switch it.additionalString("disputeStatus") {
		case "Lost":
			return kindDispute, connectors.DisputeLost
		case "Accepted":
			return kindDispute, connectors.DisputeAccepted
		case "Won":
			return kindDispute, connectors.DisputeWon
		}
		return kindDispute, connectors.DisputeCreated
	case "INFORMATION_SUPPLIED":
		return kindDispute, connectors.DisputeChallenged
	case "CHARGEBACK_REVERSED":
		// The defence was accepted, but with disputeStatus Pending "this stage is not final. If
		// the issuing bank presents a second chargeback, you can still lose" (Adyen's webhook
		// reference): still open, not decided for the merchant. Won, or no status (Brazil, where
		// nothing tells the two apart), is the dispute won.
		if it.additionalString("disputeStatus") == "Pending" {
			return kindDispute, connectors.DisputeChallenged
		}
		return kindDispute, connectors.DisputeWon
	// The scheme's ruling on a pre-arbitration escalated to it closes the dispute.
	case "PREARBITRATION_WON", "SCHEME_ARBITRATION_WON":
		return kindDispute, connectors.DisputeWon
	case "SECOND_CHARGEBACK", "PREARBITRATION_LOST", "SCHEME_ARBITRATION_LOST":
		return kindDispute, connectors.DisputeLost
	case "ISSUER_RESPONSE_TIMEFRAME_EXPIRED":
		// "The issuer accepted your defense of the dispute or did not respond in time" (Adyen's
		// webhook reference): the defence stands.
		return kindDispute, connectors.DisputeWon
	case "DISPUTE_DEFENSE_PERIOD_ENDED":
		// "You have not defended the dispute within the timeframe, or the defense period ended
		// because you accepted liability" (Adyen's webhook reference): the chargeback stands.
		// A defence under review (Pending, which this event is not documented for) concludes
		// nothing.
		switch it.additionalString("disputeStatus") {
		case "Accepted":
			return kindDispute, connectors.DisputeAccepted
		case "Pending":
			return kindNone, connectors.EventTypeUnsupported
		}
		return kindDispute, connectors.DisputeLost
	}
	return kindNone, connectors.EventTypeUnsupported
}

package checkout

import (
	"encoding/json"
	"errors"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/internal/norm"
)

// event is a Checkout.com webhook body
// (https://www.checkout.com/docs/developer-resources/event-notifications/event-types).
// Older deliveries carry created_on, newer ones timestamp.
type event struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CreatedOn string `json:"created_on"`
	Timestamp string `json:"timestamp"`
	Data      struct {
		ID               string `json:"id"`
		ActionID         string `json:"action_id"`
		PaymentID        string `json:"payment_id"`
		Reference        string `json:"reference"`
		PaymentReference string `json:"payment_reference"`
		Amount           int64  `json:"amount"`
		Currency         string `json:"currency"`
		ResponseCode     string `json:"response_code"`
		ResponseSummary  string `json:"response_summary"`
		ProcessedOn      string `json:"processed_on"`
		Status           string `json:"status"`
		Category         string `json:"category"`
		ReasonCode       string `json:"reason_code"`
		Date             string `json:"date"`
		PaymentActionID  string `json:"payment_action_id"`
		// Destination is set for payouts only: the bank account or card paid out to.
		Destination json.RawMessage `json:"destination"`
	} `json:"data"`
}

// Parse implements connectors.Connector.
func (c *Connector) Parse(req *connectors.Request) (*connectors.Event, error) {
	var e event
	if err := json.Unmarshal(req.Body, &e); err != nil {
		return nil, &connectors.ParseError{Connector: Name, Err: err}
	}
	if e.Type == "" {
		return nil, &connectors.ParseError{Connector: Name, Err: errors.New("event has no type")}
	}
	occurred := e.Timestamp
	if occurred == "" {
		occurred = e.CreatedOn
	}
	ev := &connectors.Event{
		Type:               connectors.EventTypeUnsupported,
		ConnectorEventType: e.Type,
		MerchantEventID:    e.ID,
		OccurredAt:         norm.Time(occurred),
	}
	d := &e.Data
	// Checkout sends payment_approved, payment_declined, payment_paid... for payouts too
	// (docs: "when a payment authorization or a payout is approved"): money sent out, not a
	// payment received, so none of the types this model has. A payout's data names its
	// destination; a payment's does not.
	if len(d.Destination) > 0 && string(d.Destination) != "null" {
		return ev, nil
	}
	action := d.ActionID
	if action == "" {
		action = d.ID
	}
	switch kind, t := classify(e.Type); kind {
	case kindPayment:
		ev.Type = t
		ev.Payment = &connectors.PaymentDetails{
			PaymentID:              d.ID,
			ConnectorTransactionID: action,
			MerchantReference:      d.Reference,
			AmountMinor:            d.Amount,
			Currency:               norm.Currency(d.Currency),
			Status:                 d.ResponseCode,
			Reason:                 d.ResponseSummary,
			CreatedAt:              norm.Time(d.ProcessedOn),
		}
	case kindRefund:
		// Refund events describe the payment; the refund is its action.
		ev.Type = t
		ev.Refund = &connectors.RefundDetails{
			RefundID:               d.ActionID,
			PaymentID:              d.ID,
			ConnectorTransactionID: action,
			MerchantReference:      d.Reference,
			AmountMinor:            d.Amount,
			Currency:               norm.Currency(d.Currency),
			Status:                 d.ResponseCode,
			Reason:                 d.ResponseSummary,
			CreatedAt:              norm.Time(d.ProcessedOn),
		}
	case kindDispute:
		ev.Type = t
		ev.Dispute = &connectors.DisputeDetails{
			DisputeID:              d.ID,
			PaymentID:              d.PaymentID,
			ConnectorTransactionID: d.PaymentActionID,
			MerchantReference:      d.PaymentReference,
			AmountMinor:            d.Amount,
			Currency:               norm.Currency(d.Currency),
			Status:                 d.Status,
			Reason:                 d.Category,
			CreatedAt:              norm.Time(d.Date),
		}
		if ev.Dispute.Reason == "" {
			ev.Dispute.Reason = d.ReasonCode
		}
	}
	return ev, nil
}

type kind int

const (
	kindNone kind = iota
	kindPayment
	kindRefund
	kindDispute
)

// classify maps Checkout.com event types onto the shared types.
func classify(eventType string) (kind, connectors.EventType) {
	switch eventType {
	case "payment_approved":
		return kindPayment, connectors.PaymentIntentAuthorizationSuccess
	case "payment_declined", "payment_authentication_failed":
		return kindPayment, connectors.PaymentIntentAuthorizationFailure
	case "payment_pending":
		return kindPayment, connectors.PaymentIntentProcessing
	case "payment_captured":
		return kindPayment, connectors.PaymentIntentCaptureSuccess
	case "payment_capture_declined":
		return kindPayment, connectors.PaymentIntentCaptureFailure
	case "payment_canceled", "payment_voided":
		return kindPayment, connectors.PaymentIntentCanceled
	case "payment_refunded":
		return kindRefund, connectors.ChargeRefunded
	case "payment_refund_pending":
		return kindRefund, connectors.RefundProcessing
	case "payment_refund_declined":
		return kindRefund, connectors.RefundFailure
	case "dispute_received", "dispute_evidence_required":
		return kindDispute, connectors.DisputeCreated
	case "dispute_evidence_submitted", "dispute_arbitration_evidence_submitted":
		return kindDispute, connectors.DisputeChallenged
	// An arbitration's ruling (after dispute_arbitration_evidence_submitted) is the dispute's
	// outcome, as dispute_won and dispute_lost are.
	case "dispute_won", "dispute_arbitration_won":
		return kindDispute, connectors.DisputeWon
	// expired: "you can no longer respond to a dispute, because the time limit to take action
	// has been exceeded" (Checkout's event types); the debit made with
	// dispute_evidence_required stands, as Adyen's DISPUTE_DEFENSE_PERIOD_ENDED.
	case "dispute_lost", "dispute_arbitration_lost", "dispute_expired":
		return kindDispute, connectors.DisputeLost
	case "dispute_accepted":
		return kindDispute, connectors.DisputeAccepted
	// canceled: the issuer withdrew it and the amount is credited back;
	// resolved: closed automatically because the payment was already refunded.
	case "dispute_canceled", "dispute_resolved":
		return kindDispute, connectors.DisputeClosed
	}
	return kindNone, connectors.EventTypeUnsupported
}

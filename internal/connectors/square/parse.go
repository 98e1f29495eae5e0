package square

import (
	"encoding/json"
	"errors"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/internal/norm"
)

// event is a Square webhook body (https://developer.squareup.com/reference/square/webhooks).
type event struct {
	Type      string `json:"type"`
	EventID   string `json:"event_id"`
	CreatedAt string `json:"created_at"`
	Data      struct {
		Type   string `json:"type"`
		ID     string `json:"id"`
		Object struct {
			Payment *payment `json:"payment"`
			Refund  *refund  `json:"refund"`
			Dispute *dispute `json:"dispute"`
		} `json:"object"`
	} `json:"data"`
}

type money struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

type payment struct {
	ID          string `json:"id"`
	AmountMoney money  `json:"amount_money"`
	TotalMoney  *money `json:"total_money"`
	Status      string `json:"status"`
	ReferenceID string `json:"reference_id"`
	CreatedAt   string `json:"created_at"`
}

type refund struct {
	ID          string `json:"id"`
	PaymentID   string `json:"payment_id"`
	AmountMoney money  `json:"amount_money"`
	Status      string `json:"status"`
	Reason      string `json:"reason"`
	CreatedAt   string `json:"created_at"`
}

type dispute struct {
	ID              string `json:"id"`
	LegacyID        string `json:"dispute_id"`
	AmountMoney     money  `json:"amount_money"`
	Reason          string `json:"reason"`
	State           string `json:"state"`
	CreatedAt       string `json:"created_at"`
	DisputedPayment struct {
		PaymentID string `json:"payment_id"`
	} `json:"disputed_payment"`
}

// Parse implements connectors.Connector.
func (c *Connector) Parse(req *connectors.Request) (*connectors.Event, error) {
	var e event
	if err := json.Unmarshal(req.Body, &e); err != nil {
		return nil, parseErr(err)
	}
	if e.Type == "" {
		return nil, parseErr(errors.New("event has no type"))
	}
	ev := &connectors.Event{
		Type:               connectors.EventTypeUnsupported,
		ConnectorEventType: e.Type,
		MerchantEventID:    e.EventID,
		OccurredAt:         norm.Time(e.CreatedAt),
	}
	obj := &e.Data.Object
	switch e.Type {
	case "payment.created", "payment.updated":
		if obj.Payment == nil {
			return nil, parseErr(errors.New("data.object.payment missing"))
		}
		p := obj.Payment
		ev.Type = paymentType(p.Status)
		if ev.Type != connectors.EventTypeUnsupported {
			// amount_money is "the amount processed for this payment, not including tip_money";
			// total_money (read only) is "the total amount for the payment, including
			// amount_money and tip_money" (Square's Payment object reference): what the buyer
			// is charged. A body without it (older payloads) falls back to amount_money.
			charged := p.AmountMoney
			if p.TotalMoney != nil && p.TotalMoney.Currency != "" {
				charged = *p.TotalMoney
			}
			ev.Payment = &connectors.PaymentDetails{
				PaymentID: p.ID, ConnectorTransactionID: p.ID, MerchantReference: p.ReferenceID,
				AmountMinor: charged.Amount, Currency: norm.Currency(charged.Currency),
				Status: p.Status, CreatedAt: norm.Time(p.CreatedAt),
			}
		}
	case "refund.created", "refund.updated":
		if obj.Refund == nil {
			return nil, parseErr(errors.New("data.object.refund missing"))
		}
		r := obj.Refund
		ev.Type = refundType(r.Status)
		if ev.Type != connectors.EventTypeUnsupported {
			ev.Refund = &connectors.RefundDetails{
				RefundID: r.ID, PaymentID: r.PaymentID, ConnectorTransactionID: r.ID,
				AmountMinor: r.AmountMoney.Amount, Currency: norm.Currency(r.AmountMoney.Currency),
				Status: r.Status, Reason: r.Reason, CreatedAt: norm.Time(r.CreatedAt),
			}
		}
	case "dispute.created", "dispute.state.updated", "dispute.state.changed":
		if obj.Dispute == nil {
			return nil, parseErr(errors.New("data.object.dispute missing"))
		}
		d := obj.Dispute
		ev.Type = disputeType(e.Type, d.State)
		if ev.Type != connectors.EventTypeUnsupported {
			id := d.ID
			if id == "" {
				id = d.LegacyID
			}
			ev.Dispute = &connectors.DisputeDetails{
				DisputeID: id, PaymentID: d.DisputedPayment.PaymentID, ConnectorTransactionID: d.DisputedPayment.PaymentID,
				AmountMinor: d.AmountMoney.Amount, Currency: norm.Currency(d.AmountMoney.Currency),
				Status: d.State, Reason: d.Reason, CreatedAt: norm.Time(d.CreatedAt),
			}
		}
	}
	return ev, nil
}

// paymentType follows Payment.status
// (https://developer.squareup.com/reference/square/objects/Payment#definition__property-status).
func paymentType(status string) connectors.EventType {
	switch status {
	case "COMPLETED":
		return connectors.PaymentIntentSuccess
	case "APPROVED":
		return connectors.PaymentIntentAuthorizationSuccess
	case "PENDING":
		return connectors.PaymentIntentProcessing
	case "FAILED":
		return connectors.PaymentIntentPaymentFailed
	case "CANCELED":
		return connectors.PaymentIntentCanceled
	}
	return connectors.EventTypeUnsupported
}

// refundType follows PaymentRefund.status (PENDING, COMPLETED, REJECTED, FAILED).
func refundType(status string) connectors.EventType {
	switch status {
	case "COMPLETED":
		return connectors.ChargeRefunded
	case "PENDING":
		return connectors.RefundProcessing
	case "REJECTED", "FAILED":
		return connectors.RefundFailure
	}
	return connectors.EventTypeUnsupported
}

// disputeType: creation is DisputeCreated whatever the state; a state
// update maps the states that mean something we model (DisputeState,
// https://developer.squareup.com/reference/square/enums/DisputeState).
// EVIDENCE_REQUIRED is "the initial state of a dispute with evidence required":
// reached by an update, it is an inquiry escalated to a chargeback on the same
// Dispute object (Square sends dispute.state.updated, not a new dispute.created),
// the chargeback opened. A move back to INQUIRY_EVIDENCE_REQUIRED stays
// unsupported rather than guessed.
func disputeType(eventType, state string) connectors.EventType {
	if eventType == "dispute.created" {
		return connectors.DisputeCreated
	}
	switch state {
	case "EVIDENCE_REQUIRED":
		return connectors.DisputeCreated
	case "WON":
		return connectors.DisputeWon
	case "LOST":
		return connectors.DisputeLost
	case "ACCEPTED":
		return connectors.DisputeAccepted
	case "PROCESSING", "INQUIRY_PROCESSING":
		return connectors.DisputeChallenged
	case "INQUIRY_CLOSED":
		return connectors.DisputeClosed
	}
	return connectors.EventTypeUnsupported
}

func parseErr(err error) error { return &connectors.ParseError{Connector: Name, Err: err} }

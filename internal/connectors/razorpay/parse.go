package razorpay

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/internal/norm"
)

// event is a Razorpay webhook body (https://razorpay.com/docs/webhooks/payloads/).
type event struct {
	Event     string `json:"event"`
	CreatedAt int64  `json:"created_at"`
	Payload   struct {
		Payment *struct {
			Entity entity `json:"entity"`
		} `json:"payment"`
		Refund *struct {
			Entity entity `json:"entity"`
		} `json:"refund"`
		Dispute *struct {
			Entity entity `json:"entity"`
		} `json:"dispute"`
	} `json:"payload"`
}

// entity holds the fields read from payment, refund and dispute entities.
type entity struct {
	ID                string `json:"id"`
	PaymentID         string `json:"payment_id"`
	Amount            int64  `json:"amount"`
	Currency          string `json:"currency"`
	Status            string `json:"status"`
	ErrorDescription  string `json:"error_description"`
	ReasonCode        string `json:"reason_code"`
	ReasonDescription string `json:"reason_description"`
	CreatedAt         int64  `json:"created_at"`
}

// Parse implements connectors.Connector. The body carries no event id, and
// Razorpay's X-Razorpay-Event-Id header is not signed: an id taken from it
// would let anyone who saw one delivery replay it as a new event. The merchant
// event id is left to the body's hash (Razorpay's retries resend the body
// byte for byte).
func (c *Connector) Parse(req *connectors.Request) (*connectors.Event, error) {
	var e event
	if err := json.Unmarshal(req.Body, &e); err != nil {
		return nil, &connectors.ParseError{Connector: Name, Err: err}
	}
	if e.Event == "" {
		return nil, &connectors.ParseError{Connector: Name, Err: errors.New("webhook has no event name")}
	}
	ev := &connectors.Event{
		Type:               connectors.EventTypeUnsupported,
		ConnectorEventType: e.Event,
		OccurredAt:         norm.Unix(e.CreatedAt),
	}
	t := classify(e.Event, &e)
	if t == connectors.EventTypeUnsupported {
		return ev, nil
	}
	ev.Type = t
	switch {
	case strings.HasPrefix(e.Event, "payment.dispute."):
		if e.Payload.Dispute == nil {
			return nil, missing("payload.dispute.entity")
		}
		d := &e.Payload.Dispute.Entity
		reason := d.ReasonDescription
		if reason == "" {
			reason = d.ReasonCode
		}
		ev.Dispute = &connectors.DisputeDetails{
			DisputeID: d.ID, PaymentID: d.PaymentID, ConnectorTransactionID: d.PaymentID,
			AmountMinor: d.Amount, Currency: norm.Currency(d.Currency), Status: d.Status,
			Reason: reason, CreatedAt: norm.Unix(d.CreatedAt),
		}
	case strings.HasPrefix(e.Event, "refund."):
		if e.Payload.Refund == nil {
			return nil, missing("payload.refund.entity")
		}
		r := &e.Payload.Refund.Entity
		ev.Refund = &connectors.RefundDetails{
			RefundID: r.ID, PaymentID: r.PaymentID, ConnectorTransactionID: r.ID,
			AmountMinor: r.Amount, Currency: norm.Currency(r.Currency), Status: r.Status,
			CreatedAt: norm.Unix(r.CreatedAt),
		}
	default: // payment.*
		if e.Payload.Payment == nil {
			return nil, missing("payload.payment.entity")
		}
		p := &e.Payload.Payment.Entity
		ev.Payment = &connectors.PaymentDetails{
			PaymentID: p.ID, ConnectorTransactionID: p.ID,
			AmountMinor: p.Amount, Currency: norm.Currency(p.Currency), Status: p.Status,
			Reason: p.ErrorDescription, CreatedAt: norm.Unix(p.CreatedAt),
		}
	}
	return ev, nil
}

// classify maps Razorpay event names
// (https://razorpay.com/docs/webhooks/payments/, .../refunds/, .../disputes/).
func classify(name string, e *event) connectors.EventType {
	switch name {
	case "payment.authorized":
		return connectors.PaymentIntentAuthorizationSuccess
	case "payment.captured":
		return connectors.PaymentIntentCaptureSuccess
	case "payment.failed":
		return connectors.PaymentIntentPaymentFailed
	case "refund.processed":
		return connectors.ChargeRefunded
	case "refund.failed":
		return connectors.RefundFailure
	case "refund.created":
		// Created refunds are usually pending; instant ones arrive processed.
		if e.Payload.Refund != nil && e.Payload.Refund.Entity.Status == "processed" {
			return connectors.ChargeRefunded
		}
		return connectors.RefundProcessing
	case "payment.dispute.created":
		return connectors.DisputeCreated
	case "payment.dispute.under_review":
		return connectors.DisputeChallenged
	case "payment.dispute.won":
		return connectors.DisputeWon
	case "payment.dispute.lost":
		return connectors.DisputeLost
	case "payment.dispute.closed":
		return connectors.DisputeClosed
	}
	return connectors.EventTypeUnsupported
}

func missing(field string) error {
	return &connectors.ParseError{Connector: Name, Err: errors.New(field + " missing")}
}

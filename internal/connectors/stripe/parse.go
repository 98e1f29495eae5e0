package stripe

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/internal/norm"
)

// Parse implements connectors.Connector.
func (c *Connector) Parse(req *connectors.Request) (*connectors.Event, error) {
	var e event
	if err := json.Unmarshal(req.Body, &e); err != nil {
		return nil, &connectors.ParseError{Connector: Name, Err: err}
	}
	if e.Type == "" {
		return nil, &connectors.ParseError{Connector: Name, Err: errors.New("event has no type")}
	}
	occurred, err := created(e.Created)
	if err != nil {
		return nil, &connectors.ParseError{Connector: Name, Err: err}
	}
	ev := &connectors.Event{
		Type:               connectors.EventTypeUnsupported,
		ConnectorEventType: e.Type,
		MerchantEventID:    e.ID,
		OccurredAt:         occurred,
	}
	if !mapped(e.Type) {
		return ev, nil
	}
	o := &object{}
	if len(e.Data.Object) > 0 {
		if err := json.Unmarshal(e.Data.Object, o); err != nil {
			return nil, &connectors.ParseError{Connector: Name, Err: wrapObjectErr(err)}
		}
	}
	switch kind, t := classify(e.Type, o); kind {
	case kindPayment:
		ev.Type, ev.Payment = t, payment(e.Type, o)
	case kindRefund:
		ev.Type, ev.Refund = t, refund(o)
	case kindDispute:
		ev.Type, ev.Dispute = t, dispute(o)
	}
	return ev, nil
}

// created reads the event's creation time: epoch seconds (snapshot events) or an RFC 3339
// string (thin events); absent or null is unknown.
func created(raw json.RawMessage) (time.Time, error) {
	var v any
	if len(raw) == 0 {
		return time.Time{}, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return time.Time{}, err
	}
	switch c := v.(type) {
	case nil:
		return time.Time{}, nil
	case string:
		return norm.Time(c), nil
	case float64:
		var sec int64
		if err := json.Unmarshal(raw, &sec); err != nil {
			return time.Time{}, errors.New("created is not whole epoch seconds")
		}
		return norm.Unix(sec), nil
	}
	return time.Time{}, errors.New("created is neither epoch seconds nor a date-time string")
}

// wrapObjectErr names data.object in a type error, as decoding the whole envelope did.
func wrapObjectErr(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := "data.object"
		if te.Field != "" {
			field += "." + te.Field
		}
		return &json.UnmarshalTypeError{Value: te.Value, Type: te.Type, Offset: te.Offset, Field: field}
	}
	return err
}

// mapped reports whether classify may map eventType to a type other than
// EventTypeUnsupported: only those events' objects are decoded.
func mapped(eventType string) bool {
	switch eventType {
	case "payment_intent.succeeded", "payment_intent.payment_failed", "charge.failed",
		"payment_intent.processing", "charge.pending", "payment_intent.canceled",
		"payment_intent.amount_capturable_updated", "charge.succeeded", "charge.captured",
		"charge.refunded", "refund.failed", "charge.refund.updated", "refund.created", "refund.updated",
		"charge.dispute.created", "charge.dispute.funds_withdrawn", "charge.dispute.updated", "charge.dispute.closed":
		return true
	}
	return false
}

type kind int

const (
	kindNone kind = iota
	kindPayment
	kindRefund
	kindDispute
)

// classify maps a Stripe event type (and, where the type alone is
// ambiguous, the object's state) onto the shared types.
// Every type with a case here is in mapped, or its object is never decoded.
func classify(eventType string, o *object) (kind, connectors.EventType) {
	switch eventType {
	case "payment_intent.succeeded":
		return kindPayment, connectors.PaymentIntentSuccess
	case "payment_intent.payment_failed", "charge.failed":
		return kindPayment, connectors.PaymentIntentPaymentFailed
	case "payment_intent.processing", "charge.pending":
		return kindPayment, connectors.PaymentIntentProcessing
	case "payment_intent.canceled":
		return kindPayment, connectors.PaymentIntentCanceled
	case "payment_intent.amount_capturable_updated":
		return kindPayment, connectors.PaymentIntentAuthorizationSuccess
	case "charge.succeeded":
		// An uncaptured charge only holds an authorization.
		if o.Captured {
			return kindPayment, connectors.PaymentIntentSuccess
		}
		return kindPayment, connectors.PaymentIntentAuthorizationSuccess
	case "charge.captured":
		return kindPayment, connectors.PaymentIntentCaptureSuccess
	case "charge.refunded":
		// Sent when a refund is created, which may be pending: the newest refund's own status,
		// when the charge lists its refunds, says whether it succeeded.
		if o.Refunds != nil && len(o.Refunds.Data) > 0 {
			if t, ok := refundStatusType(o.Refunds.Data[0].Status); ok {
				return kindRefund, t
			}
		}
		return kindRefund, connectors.ChargeRefunded
	case "refund.failed":
		return kindRefund, connectors.RefundFailure
	case "charge.refund.updated", "refund.created", "refund.updated":
		if t, ok := refundStatusType(o.Status); ok {
			return kindRefund, t
		}
	case "charge.dispute.created":
		return kindDispute, connectors.DisputeCreated
	case "charge.dispute.funds_withdrawn":
		// The chargeback opened: sent after an ordinary chargeback's created, and the only news
		// that an inquiry (warning_ status, no funds moved) escalated on the same dispute.
		// funds_reinstated stays unsupported: charge.dispute.closed won says the same.
		return kindDispute, connectors.DisputeCreated
	case "charge.dispute.updated":
		if t, ok := disputeUpdatedType(o.Status); ok {
			return kindDispute, t
		}
	case "charge.dispute.closed":
		return kindDispute, disputeClosedType(o.Status)
	}
	return kindNone, connectors.EventTypeUnsupported
}

// refundStatusType follows https://docs.stripe.com/api/refunds/object#refund_object-status.
func refundStatusType(status string) (connectors.EventType, bool) {
	switch status {
	case "succeeded":
		return connectors.ChargeRefunded, true
	case "pending", "requires_action":
		return connectors.RefundProcessing, true
	case "failed", "canceled":
		return connectors.RefundFailure, true
	}
	return "", false
}

// disputeUpdatedType: an update only says something we model when the
// dispute moved to review or to a decision; "needs_response" updates stay
// unsupported rather than being guessed as a new dispute.
func disputeUpdatedType(status string) (connectors.EventType, bool) {
	switch status {
	case "under_review", "warning_under_review":
		return connectors.DisputeChallenged, true
	case "won":
		return connectors.DisputeWon, true
	case "lost":
		return connectors.DisputeLost, true
	case "warning_closed":
		return connectors.DisputeClosed, true
	}
	return "", false
}

// disputeClosedType: a closed dispute reports its outcome in status; an
// inquiry that closes without a chargeback ("warning_closed") or any other
// status is DisputeClosed.
func disputeClosedType(status string) connectors.EventType {
	switch status {
	case "won":
		return connectors.DisputeWon
	case "lost":
		return connectors.DisputeLost
	}
	return connectors.DisputeClosed
}

func payment(eventType string, o *object) *connectors.PaymentDetails {
	p := &connectors.PaymentDetails{
		AmountMinor: o.Amount,
		Currency:    norm.Currency(o.Currency),
		Status:      o.Status,
		CreatedAt:   norm.Unix(o.Created),
	}
	switch o.Object {
	case "charge":
		p.PaymentID = string(o.PaymentIntent)
		p.ConnectorTransactionID = o.ID
		p.Reason = o.FailureMessage
		// amount is what the charge asked for; a captured charge reports what was captured,
		// less after a partial capture (as payment_intent.succeeded reports amount_received).
		if o.Captured && o.AmountCaptured > 0 {
			p.AmountMinor = o.AmountCaptured
		}
		if p.PaymentID == "" { // charges made without a PaymentIntent
			p.PaymentID = o.ID
		}
	default: // payment_intent
		p.PaymentID = o.ID
		p.ConnectorTransactionID = string(o.LatestCharge)
		if eventType == "payment_intent.succeeded" && o.AmountReceived > 0 {
			p.AmountMinor = o.AmountReceived
		}
		// "Check the amount_capturable property on the PaymentIntent to determine the amount
		// that can be captured" (Stripe's event reference): what is held, not what was asked.
		if eventType == "payment_intent.amount_capturable_updated" && o.AmountCapturable > 0 {
			p.AmountMinor = o.AmountCapturable
		}
		if o.LastPaymentError != nil {
			p.Reason = o.LastPaymentError.Message
		}
		if o.CancellationReason != "" {
			p.Reason = o.CancellationReason
		}
		if p.ConnectorTransactionID == "" {
			p.ConnectorTransactionID = o.ID
		}
	}
	return p
}

func refund(o *object) *connectors.RefundDetails {
	r := &connectors.RefundDetails{
		Currency:  norm.Currency(o.Currency),
		Status:    o.Status,
		CreatedAt: norm.Unix(o.Created),
	}
	if o.Object == "charge" { // charge.refunded carries the charge
		r.PaymentID = string(o.PaymentIntent)
		r.ConnectorTransactionID = o.ID
		// amount_refunded is the charge's total refunded so far; charge.refunded is sent for
		// every partial refund, so the newest refund's own amount is this refund's, when the
		// charge lists its refunds (API versions before 2022-11-15, or expanded).
		r.AmountMinor = o.AmountRefunded
		if o.Refunds != nil && len(o.Refunds.Data) > 0 {
			newest := o.Refunds.Data[0] // newest first
			r.RefundID = newest.ID
			if newest.Amount != nil {
				r.AmountMinor = *newest.Amount
			}
			if newest.Status != "" {
				r.Status = newest.Status
			}
		}
		if r.PaymentID == "" {
			r.PaymentID = o.ID
		}
		return r
	}
	r.RefundID = o.ID
	r.PaymentID = string(o.PaymentIntent)
	r.ConnectorTransactionID = string(o.Charge)
	if r.PaymentID == "" { // a refund of a charge made without a PaymentIntent
		r.PaymentID = r.ConnectorTransactionID
	}
	r.AmountMinor = o.Amount
	r.Reason = o.Reason
	if o.FailureReason != "" {
		r.Reason = o.FailureReason
	}
	return r
}

func dispute(o *object) *connectors.DisputeDetails {
	d := &connectors.DisputeDetails{
		DisputeID:              o.ID,
		PaymentID:              string(o.PaymentIntent),
		ConnectorTransactionID: string(o.Charge),
		AmountMinor:            o.Amount,
		Currency:               norm.Currency(o.Currency),
		Status:                 o.Status,
		Reason:                 o.Reason,
		CreatedAt:              norm.Unix(o.Created),
	}
	// A charge made without a PaymentIntent is the payment (payment_intent is null), as the
	// payment events of such a charge say.
	if d.PaymentID == "" {
		d.PaymentID = d.ConnectorTransactionID
	}
	return d
}

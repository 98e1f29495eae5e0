package stripe

import (
	"bytes"
	"encoding/json"
)

// event is the envelope Stripe posts (https://docs.stripe.com/api/events/object).
//
// Only id and type are read before the type is known: created is epoch seconds in snapshot
// events but an RFC 3339 string in thin (API v2) events, and data.object is whatever object
// the event is about (a billing.credit_grant's "amount" is an object, not an integer). It is
// decoded into object only for the types classify maps, so that a verified event of another
// type is EventTypeUnsupported rather than refused.
type event struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Created json.RawMessage `json:"created"`
	Data    struct {
		Object json.RawMessage `json:"object"`
	} `json:"data"`
}

// object holds the fields we read from the PaymentIntent, Charge, Refund and
// Dispute objects; which ones are set depends on the event type.
type object struct {
	ID             string `json:"id"`
	Object         string `json:"object"`
	Amount         int64  `json:"amount"`
	AmountReceived int64  `json:"amount_received"`
	// AmountCapturable is what a PaymentIntent holds for capture (less than amount after a
	// partial authorization or a non-final capture).
	AmountCapturable int64  `json:"amount_capturable"`
	AmountCaptured   int64  `json:"amount_captured"`
	AmountRefunded   int64  `json:"amount_refunded"`
	Currency         string `json:"currency"`
	Status           string `json:"status"`
	Created          int64  `json:"created"`
	Captured         bool   `json:"captured"`
	// Reason is a dispute's or refund's reason.
	Reason             string   `json:"reason"`
	CancellationReason string   `json:"cancellation_reason"`
	FailureMessage     string   `json:"failure_message"`
	FailureReason      string   `json:"failure_reason"`
	PaymentIntent      expanded `json:"payment_intent"`
	Charge             expanded `json:"charge"`
	LatestCharge       expanded `json:"latest_charge"`
	LastPaymentError   *struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"last_payment_error"`
	Refunds *struct {
		Data []struct {
			ID     string `json:"id"`
			Amount *int64 `json:"amount"`
			Status string `json:"status"`
		} `json:"data"`
	} `json:"refunds"`
}

// expanded is a Stripe expandable field: an id string, or the object itself
// when the field was expanded. Either way we keep the id.
type expanded string

func (e *expanded) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var obj struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &obj); err != nil {
			return err
		}
		*e = expanded(obj.ID)
		return nil
	}
	var s *string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s != nil {
		*e = expanded(*s)
	}
	return nil
}

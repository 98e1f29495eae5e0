package connectors

import "time"

// EventType is the processor-independent kind of a webhook event.
type EventType string

// Event types. Which processor event maps to which type is listed per
// connector in README.md.
const (
	// PaymentIntentSuccess: the payment completed and funds were captured,
	// reported by the processor as one step.
	PaymentIntentSuccess EventType = "PAYMENT_INTENT_SUCCESS"
	// PaymentIntentPaymentFailed: the payment failed.
	PaymentIntentPaymentFailed EventType = "PAYMENT_INTENT_PAYMENT_FAILED"
	// PaymentIntentProcessing: the outcome is pending (async method, review).
	PaymentIntentProcessing EventType = "PAYMENT_INTENT_PROCESSING"
	// PaymentIntentCanceled: the payment was canceled or voided.
	PaymentIntentCanceled EventType = "PAYMENT_INTENT_CANCELED"
	// PaymentIntentAuthorizationSuccess: funds are authorized, not captured.
	PaymentIntentAuthorizationSuccess EventType = "PAYMENT_INTENT_AUTHORIZATION_SUCCESS"
	// PaymentIntentAuthorizationFailure: the authorization was declined.
	PaymentIntentAuthorizationFailure EventType = "PAYMENT_INTENT_AUTHORIZATION_FAILURE"
	// PaymentIntentCaptureSuccess: a capture of an authorized payment succeeded.
	PaymentIntentCaptureSuccess EventType = "PAYMENT_INTENT_CAPTURE_SUCCESS"
	// PaymentIntentCaptureFailure: a capture failed.
	PaymentIntentCaptureFailure EventType = "PAYMENT_INTENT_CAPTURE_FAILURE"
	// ChargeRefunded: a refund succeeded.
	ChargeRefunded EventType = "CHARGE_REFUNDED"
	// RefundProcessing: a refund was created and is not final yet.
	RefundProcessing EventType = "REFUND_PROCESSING"
	// RefundFailure: a refund failed, was rejected or canceled.
	RefundFailure EventType = "REFUND_FAILURE"
	// DisputeCreated: a dispute, chargeback or inquiry was opened.
	DisputeCreated EventType = "DISPUTE_CREATED"
	// DisputeChallenged: the merchant submitted evidence; under review.
	DisputeChallenged EventType = "DISPUTE_CHALLENGED"
	// DisputeWon: the dispute was decided for the merchant.
	DisputeWon EventType = "DISPUTE_WON"
	// DisputeLost: the dispute was decided for the cardholder.
	DisputeLost EventType = "DISPUTE_LOST"
	// DisputeAccepted: the merchant accepted the dispute (funds stay lost).
	DisputeAccepted EventType = "DISPUTE_ACCEPTED"
	// DisputeClosed: the dispute ended without a won/lost outcome we can tell
	// (inquiry closed, canceled, resolved).
	DisputeClosed EventType = "DISPUTE_CLOSED"
	// EventTypeUnsupported: a verified event this connector does not map.
	// It is a normal result, not an error.
	EventTypeUnsupported EventType = "EVENT_TYPE_UNSUPPORTED"
)

// EventTypes lists every normalized type, EventTypeUnsupported included: the values a
// PaymentEvent's eventType can hold, and so the only ones a sink filter can match.
var EventTypes = []EventType{
	PaymentIntentSuccess, PaymentIntentPaymentFailed, PaymentIntentProcessing, PaymentIntentCanceled,
	PaymentIntentAuthorizationSuccess, PaymentIntentAuthorizationFailure, PaymentIntentCaptureSuccess,
	PaymentIntentCaptureFailure, ChargeRefunded, RefundProcessing, RefundFailure, DisputeCreated,
	DisputeChallenged, DisputeWon, DisputeLost, DisputeAccepted, DisputeClosed, EventTypeUnsupported,
}

// Event is a verified webhook in the shared model. For a mapped event
// exactly one of Payment, Refund and Dispute is set; for
// EventTypeUnsupported none is.
type Event struct {
	Connector string
	Type      EventType
	// ConnectorEventType is the processor's own event name, e.g.
	// "payment_intent.succeeded" or "AUTHORISATION".
	ConnectorEventType string
	// MerchantEventID is the de-duplication key: caller-supplied, else the
	// processor's event id, else "sha256:<hex of body>".
	MerchantEventID string
	// Complete is true when Type is mapped and the details carry their
	// primary id. Handle sets it.
	Complete bool
	// OccurredAt is when the processor says the event happened (zero if the
	// payload has no such time).
	OccurredAt time.Time

	Payment *PaymentDetails
	Refund  *RefundDetails
	Dispute *DisputeDetails

	// Items is set only for notifications that batch several events (Adyen
	// with more than one NotificationRequestItem). It holds every item in
	// order, each a full Event; the top-level fields describe Items[0].
	Items []Event
}

// PaymentDetails describes the payment an event is about.
type PaymentDetails struct {
	// PaymentID is the processor's id of the payment (pi_…, or ch_… for a
	// Stripe charge made without a PaymentIntent; pay_…, the Adyen
	// pspReference of the payment, the Authorize.net transId).
	PaymentID string
	// ConnectorTransactionID is the processor's id of the operation behind
	// this event when it differs from the payment (Stripe charge, Checkout
	// action, Adyen modification); else it equals PaymentID.
	ConnectorTransactionID string
	MerchantReference      string
	AmountMinor            int64
	Currency               string
	Status                 string
	Reason                 string
	CreatedAt              time.Time
}

// RefundDetails describes the refund an event is about.
type RefundDetails struct {
	RefundID               string
	PaymentID              string
	ConnectorTransactionID string
	MerchantReference      string
	AmountMinor            int64
	Currency               string
	Status                 string
	Reason                 string
	CreatedAt              time.Time
}

// DisputeDetails describes the dispute an event is about.
type DisputeDetails struct {
	DisputeID string
	// PaymentID is the disputed payment, named as PaymentDetails.PaymentID
	// names it in that payment's own events (a Stripe charge made without a
	// PaymentIntent: the charge); empty when the payload does not say.
	PaymentID string
	// ConnectorTransactionID is the processor's id of the disputed
	// operation: the Stripe charge, the Checkout action; for Adyen the
	// dispute's own pspReference; else it equals PaymentID.
	ConnectorTransactionID string
	MerchantReference      string
	AmountMinor            int64
	Currency               string
	Status                 string
	Reason                 string
	CreatedAt              time.Time
}

// isComplete reports whether the event is mapped and its details name the
// object they are about.
func (e *Event) isComplete() bool {
	if e.Type == EventTypeUnsupported || e.Type == "" {
		return false
	}
	switch {
	case e.Payment != nil:
		return e.Payment.PaymentID != ""
	case e.Refund != nil:
		return e.Refund.RefundID != ""
	case e.Dispute != nil:
		return e.Dispute.DisputeID != ""
	}
	return false
}

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels on every PaymentEvent, for selection (`kubectl get paymentevents -l …`).
const (
	LabelPaymentConnector = "videogen.dev/connector"
	LabelPaymentEventType = "videogen.dev/event-type"
)

// PaymentEvent condition types and reasons.
const (
	// ConditionProcessed: the controller recorded the event (metrics, Kubernetes events) and
	// planned its deliveries. Points are never credited from a payment event.
	ConditionProcessed = "Processed"
	// ConditionForwarded: every sink that accepts the event has acknowledged it. False with
	// reason NoSinks when none accepts it (nothing was sent, nothing to retry), False with
	// DeliveryFailed when a sink was given up; `kubectl get -o wide` shows the reason.
	ConditionForwarded = "Forwarded"

	ReasonEventRecorded = "Recorded"
	// ReasonDisputeWarningOwed: Processed, and the Warning DisputeCreated that tells a dispute
	// opened is still to be emitted (the write that records it comes first, so a crash before the
	// Warning leaves it owed, not lost); Recorded once it was.
	ReasonDisputeWarningOwed = "DisputeWarningOwed"
	ReasonSinksDelivered     = "Delivered"
	ReasonSinksPending       = "DeliveryPending"
	ReasonSinkFailed         = "DeliveryFailed"
	ReasonNoSinks            = "NoSinks"
	ReasonDisputeCreated     = "DisputeCreated"
	ReasonPaymentReceived    = "PaymentEventReceived"
	// ReasonRedeliver: a videogen.dev/redeliver request was carried out.
	ReasonRedeliver = "Redeliver"
)

// Bounds of what a PaymentEvent stores (the ingress truncates to them): processor text is
// untrusted, and an object in etcd must stay small.
const (
	PaymentEventMaxIDLength   = 255
	PaymentEventMaxTextLength = 512
	PaymentEventMaxItems      = 32
	// PaymentEventMaxSinks bounds status.sinks: one row per sink an event is forwarded to.
	PaymentEventMaxSinks = 16
	// PaymentEventMaxRedeliverHandledLength bounds status.redeliverHandled (its MaxLength).
	PaymentEventMaxRedeliverHandledLength = 256
)

// PaymentEventDetails describes the payment, refund or dispute an event is about, in the
// connectors' processor-independent shape.
type PaymentEventDetails struct {
	// PaymentID is the processor's id of the payment (pi_…, or ch_… for a Stripe charge made
	// without a PaymentIntent; pay_…, a pspReference). A dispute or refund names the payment it
	// is on here, when the processor says.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	PaymentID string `json:"paymentID,omitempty"`
	// RefundID is set for refund events.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	RefundID string `json:"refundID,omitempty"`
	// DisputeID is set for dispute events.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	DisputeID string `json:"disputeID,omitempty"`
	// ConnectorTransactionID is the processor's id of the operation behind the event.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	ConnectorTransactionID string `json:"connectorTransactionID,omitempty"`
	// MerchantReference is the merchant's own reference for the payment (an order number), as
	// the processor reports it.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	MerchantReference string `json:"merchantReference,omitempty"`
	// AmountMinor is in minor units of Currency (cents for USD).
	// +optional
	AmountMinor int64 `json:"amountMinor,omitempty"`
	// Currency is the upper-case ISO 4217 code.
	// +kubebuilder:validation:MaxLength=8
	// +optional
	Currency string `json:"currency,omitempty"`
	// Status is the processor's status of the payment, refund or dispute, in its own words.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Status string `json:"status,omitempty"`
	// Reason is the processor's reason, e.g. a dispute's or a refund's.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Reason string `json:"reason,omitempty"`
	// CreatedAt is when the processor says the payment, refund or dispute was created.
	// +optional
	CreatedAt *metav1.Time `json:"createdAt,omitempty"`
}

// PaymentEventItem is one item of a delivery that batches several events (Adyen).
type PaymentEventItem struct {
	// MerchantEventID is the item's own event id at the processor.
	// +kubebuilder:validation:MaxLength=255
	MerchantEventID string `json:"merchantEventID"`
	// EventType is the item's normalized type, e.g. CHARGE_REFUNDED.
	// +kubebuilder:validation:MaxLength=64
	EventType string `json:"eventType"`
	// ConnectorEventType is the processor's own name of the item's event.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	ConnectorEventType string `json:"connectorEventType,omitempty"`
	// Payment describes the payment the event is about, when it is about one.
	// +optional
	Payment *PaymentEventDetails `json:"payment,omitempty"`
	// Refund describes the refund the event is about, when it is about one.
	// +optional
	Refund *PaymentEventDetails `json:"refund,omitempty"`
	// Dispute describes the dispute the event is about, when it is about one.
	// +optional
	Dispute *PaymentEventDetails `json:"dispute,omitempty"`
}

// PaymentEventSpec is a verified, normalized payment webhook. The raw body is not stored (it
// may carry personal data and is unbounded): only its SHA-256 and size. Longer processor
// strings are cut to the documented bounds.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a payment event is immutable"
type PaymentEventSpec struct {
	// Connector is the processor that sent the event, e.g. stripe.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]{1,32}$`
	// +required
	Connector string `json:"connector"`
	// MerchantEventID is the de-duplication key (the processor's event id, else the body hash).
	// The object's name is derived from it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +required
	MerchantEventID string `json:"merchantEventID"`
	// EventType is the normalized type, e.g. PAYMENT_INTENT_SUCCESS or DISPUTE_CREATED.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	EventType string `json:"eventType"`
	// ConnectorEventType is the processor's own name, e.g. payment_intent.succeeded.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	ConnectorEventType string `json:"connectorEventType,omitempty"`
	// Complete is true when the type is mapped and the details carry their primary id.
	// +optional
	Complete bool `json:"complete,omitempty"`
	// AmountMinor and Currency repeat the amount of the payment, refund or dispute, for display.
	// +optional
	AmountMinor *int64 `json:"amountMinor,omitempty"`
	// Currency is the upper-case ISO 4217 code of amountMinor.
	// +kubebuilder:validation:MaxLength=8
	// +optional
	Currency string `json:"currency,omitempty"`
	// Payment describes the payment the event is about, when it is about one.
	// +optional
	Payment *PaymentEventDetails `json:"payment,omitempty"`
	// Refund describes the refund the event is about, when it is about one.
	// +optional
	Refund *PaymentEventDetails `json:"refund,omitempty"`
	// Dispute describes the dispute the event is about, when it is about one.
	// +optional
	Dispute *PaymentEventDetails `json:"dispute,omitempty"`
	// Items holds every item of a batched delivery (Adyen), at most 32.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Items []PaymentEventItem `json:"items,omitempty"`
	// ItemsOmitted counts the items past the first 32 that were not stored.
	// +optional
	ItemsOmitted int32 `json:"itemsOmitted,omitempty"`
	// OccurredAt is when the processor says the event happened.
	// +optional
	OccurredAt *metav1.Time `json:"occurredAt,omitempty"`
	// ReceivedAt is when the ingress verified the delivery.
	// +required
	ReceivedAt metav1.Time `json:"receivedAt"`
	// BodySHA256 is the hex SHA-256 of the raw body as received.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +required
	BodySHA256 string `json:"bodySHA256"`
	// BodySize is the raw body's length in bytes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BodySize int64 `json:"bodySize,omitempty"`
}

// DeliveryState is where the delivery of an event to one sink stands.
// +kubebuilder:validation:Enum=Pending;Delivered;Failed
type DeliveryState string

const (
	// DeliveryPending: not yet acknowledged; NextAttemptAt says when it is tried next.
	DeliveryPending DeliveryState = "Pending"
	// DeliveryDelivered: the sink answered 2xx.
	DeliveryDelivered DeliveryState = "Delivered"
	// DeliveryFailed: given up (attempts exhausted, the sink answered 410, or it was removed).
	DeliveryFailed DeliveryState = "Failed"
)

// SinkDelivery is the delivery state of the event to one sink. It lives in status so that a
// manager restart resumes every delivery where it stood.
type SinkDelivery struct {
	// Name of the sink in the sink configuration.
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`
	// WebhookID is sent as webhook-id on every attempt, so the receiver can de-duplicate.
	// +kubebuilder:validation:MaxLength=64
	// +required
	WebhookID string `json:"webhookID"`
	// State is where the delivery stands: Pending (not yet acknowledged), Delivered (the sink
	// answered 2xx) or Failed (given up).
	// +required
	State DeliveryState `json:"state"`

	DeliveryAttempts `json:",inline"`
}

// PaymentEventStatus records the processing and the delivery to each sink.
type PaymentEventStatus struct {
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Processed (the event was recorded and its deliveries planned) and Forwarded
	// (every sink that takes it acknowledged it; reason Delivered, DeliveryPending,
	// DeliveryFailed or NoSinks). Forwarded is False for two reasons: DeliveryFailed, a sink was
	// given up (status.sinks says which; the videogen.dev/redeliver annotation sends it again),
	// and NoSinks, no configured sink takes the event, so nothing was sent and nothing is to be
	// retried.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Sinks holds one row per sink the event is forwarded to.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	// +optional
	Sinks []SinkDelivery `json:"sinks,omitempty"`
	// RedeliverHandled is the value of the videogen.dev/redeliver annotation whose request the
	// controller carried out, or "sha256:" and the hex SHA-256 of a value longer than 256
	// characters: a new value asks again.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	RedeliverHandled string `json:"redeliverHandled,omitempty"`
}

// AnnotationRedeliver asks the controller to try again the sinks a PaymentEvent was not
// delivered to (rows Failed: retries exhausted, or 410 Gone), with the same webhook-id and a
// fresh retry schedule. Any new value is a new request (`kubectl annotate --overwrite
// videogen.dev/redeliver="$(date +%s)"`), as Flux's reconcile.fluxcd.io/requestedAt.
const AnnotationRedeliver = "videogen.dev/redeliver"

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pev,categories=videogen
// +kubebuilder:printcolumn:name="Connector",type=string,JSONPath=`.spec.connector`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.eventType`
// +kubebuilder:printcolumn:name="Amount",type=integer,JSONPath=`.spec.amountMinor`
// +kubebuilder:printcolumn:name="Currency",type=string,JSONPath=`.spec.currency`
// +kubebuilder:printcolumn:name="Processed",type=string,JSONPath=`.status.conditions[?(@.type=="Processed")].status`
// +kubebuilder:printcolumn:name="Forwarded",type=string,JSONPath=`.status.conditions[?(@.type=="Forwarded")].status`,priority=1
// +kubebuilder:printcolumn:name="Forward Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Forwarded")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// PaymentEvent is one verified payment webhook, stored once per connector and merchant event id
// (the name is derived from both), recorded and forwarded to the configured sinks. It never
// moves points: top-ups stay offline and manual (PointTopUp).
type PaymentEvent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the verified, normalized payment webhook. The raw body is not stored (it may
	// carry personal data and is unbounded): only its SHA-256 and size.
	// +required
	Spec PaymentEventSpec `json:"spec"`
	// status records the processing of the event and its delivery to each sink.
	// +optional
	Status PaymentEventStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// PaymentEventList contains a list of PaymentEvent.
type PaymentEventList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PaymentEvent `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PaymentEvent{}, &PaymentEventList{})
}

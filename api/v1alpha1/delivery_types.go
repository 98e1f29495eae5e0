package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DeliveryAttempts is the record of an outgoing webhook's attempts, the same for a task's
// completion callback and a PaymentEvent's delivery to a sink.
type DeliveryAttempts struct {
	// Attempts made so far.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// LastStatus is the HTTP status of the last attempt (0 when there was no answer).
	// +optional
	LastStatus int32 `json:"lastStatus,omitempty"`
	// LastError says why the last attempt failed.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	LastError string `json:"lastError,omitempty"`
	// LastAttemptAt is when the last attempt was made.
	// +optional
	LastAttemptAt *metav1.Time `json:"lastAttemptAt,omitempty"`
	// NextAttemptAt is when the next attempt is due. One due while its share of the delivery
	// workers (its receiver's, account's or sink's) is taken waits for a free one, this time
	// unchanged.
	// +optional
	NextAttemptAt *metav1.Time `json:"nextAttemptAt,omitempty"`
	// DeliveredAt is when the receiver accepted it.
	// +optional
	DeliveredAt *metav1.Time `json:"deliveredAt,omitempty"`
}

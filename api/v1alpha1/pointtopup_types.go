package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PointTopUp condition types and reasons.
const (
	// ConditionApplied says whether the top-up was credited to the account.
	ConditionApplied = "Applied"

	ReasonCredited        = "Credited"
	ReasonAccountNotFound = "AccountNotFound"
	ReasonLedgerError     = "LedgerError"
)

// PointTopUpSpec is an offline, manual top-up made by an administrator.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a top-up is immutable; create a new one to correct it"
type PointTopUpSpec struct {
	// Amount of points to credit.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000
	// +required
	Amount int64 `json:"amount"`

	// Reference ties the top-up to its paperwork, e.g. an invoice number.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	Reference string `json:"reference"`

	// Note is free text for the audit trail.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Note string `json:"note,omitempty"`
}

// PointTopUpStatus records when the top-up was credited and the balance right after it.
type PointTopUpStatus struct {
	// AppliedAt is when the amount was credited. Set once.
	// +optional
	AppliedAt *metav1.Time `json:"appliedAt,omitempty"`

	// BalanceAfter is the account's available balance right after this top-up.
	// +optional
	BalanceAfter *int64 `json:"balanceAfter,omitempty"`

	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Applied.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ptu,categories=videogen
// +kubebuilder:printcolumn:name="Amount",type=integer,JSONPath=`.spec.amount`
// +kubebuilder:printcolumn:name="Reference",type=string,JSONPath=`.spec.reference`
// +kubebuilder:printcolumn:name="Applied",type=string,JSONPath=`.status.conditions[?(@.type=="Applied")].status`
// +kubebuilder:printcolumn:name="Balance After",type=integer,JSONPath=`.status.balanceAfter`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// PointTopUp credits points to the account of its namespace, exactly once.
type PointTopUp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec PointTopUpSpec `json:"spec"`
	// +optional
	Status PointTopUpStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// PointTopUpList contains a list of PointTopUp.
type PointTopUpList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PointTopUp `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PointTopUp{}, &PointTopUpList{})
}

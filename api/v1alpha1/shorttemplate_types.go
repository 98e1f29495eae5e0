package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// ShortTemplateIDPrefix starts every public id of a custom short template.
	ShortTemplateIDPrefix = "ushort_"
	// LabelShortTemplateID holds a ShortTemplate's public id, so it can be found by id with a
	// label selector. Whoever creates the object may set it; otherwise the controller assigns it.
	LabelShortTemplateID = "videogen.dev/short-template-id"
)

// ShortTemplateSpec is an account's own template for video.short.
type ShortTemplateSpec struct {
	// DisplayName is the name the owner gave the template: not blank, no control characters,
	// line separators or zero-width spaces, and no bidirectional overrides, which could make it
	// read as something else.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[^\x00-\x1F\x7F-\x9F\x{061C}\x{200B}\x{200E}\x{200F}\x{2028}\x{2029}\x{202A}-\x{202E}\x{2066}-\x{2069}\x{FEFF}]*$`
	// +kubebuilder:validation:XValidation:rule="size(self.trim()) > 0",message="displayName must not be blank"
	// +required
	DisplayName string `json:"displayName"`

	// TargetURL is the template video the face is swapped into.
	// +kubebuilder:validation:Pattern=`^https?://[^\x00-\x1f\x7f]*$`
	// +kubebuilder:validation:MaxLength=2048
	// +required
	TargetURL string `json:"targetURL"`

	// CoverURL is an image shown for the template.
	// +kubebuilder:validation:Pattern=`^https?://[^\x00-\x1f\x7f]*$`
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	CoverURL string `json:"coverURL,omitempty"`

	// Duration of the template video in seconds.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	Duration *int32 `json:"duration,omitempty"`
}

// ShortTemplateStatus is the observed state of a ShortTemplate.
type ShortTemplateStatus struct {
	// ID is the public id (ushort_…) used as template_id. It never changes for the object's life.
	// +optional
	ID string `json:"id,omitempty"`

	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (True with reason IDAssigned once the template has its ushort_ id, the
	// template_id to use; False with reason InvalidID when its id label is not one).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ust,categories=videogen
// +kubebuilder:printcolumn:name="ID",type=string,JSONPath=`.status.id`
// +kubebuilder:printcolumn:name="Display Name",type=string,JSONPath=`.spec.displayName`
// +kubebuilder:printcolumn:name="Duration",type=integer,JSONPath=`.spec.duration`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Target",type=string,priority=1,JSONPath=`.spec.targetURL`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ShortTemplate is a custom video.short template owned by the account of its namespace.
type ShortTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the account's own template for video.short: the video the face is swapped into.
	// +required
	Spec ShortTemplateSpec `json:"spec"`
	// status gives the template its public id (ushort_…), the template_id to use.
	// +optional
	Status ShortTemplateStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ShortTemplateList contains a list of ShortTemplate.
type ShortTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ShortTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ShortTemplate{}, &ShortTemplateList{})
}

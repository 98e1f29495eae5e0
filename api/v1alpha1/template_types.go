package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TemplateSpec describes one entry of the official template catalog.
// +kubebuilder:validation:XValidation:rule="!(self.capability in ['video.short', 'video.template', 'image.pose']) || has(self.mediaURL)",message="mediaURL is required for video.short, video.template and image.pose templates"
// +kubebuilder:validation:XValidation:rule="!self.durationAdjustable || (has(self.minDuration) && has(self.maxDuration))",message="minDuration and maxDuration are required when durationAdjustable is true"
// +kubebuilder:validation:XValidation:rule="!self.durationAdjustable || !has(self.minDuration) || !has(self.maxDuration) || self.minDuration <= self.maxDuration",message="minDuration must not exceed maxDuration"
// +kubebuilder:validation:XValidation:rule="self.durationAdjustable || !has(self.durationPrices) || size(self.durationPrices) == 0",message="durationPrices is only allowed when durationAdjustable is true"
// +kubebuilder:validation:XValidation:rule="self.durationAdjustable || (!has(self.minDuration) && !has(self.maxDuration))",message="minDuration and maxDuration are only allowed when durationAdjustable is true: a fixed template ignores them"
// +kubebuilder:validation:XValidation:rule="!self.durationAdjustable || self.capability == 'video.template'",message="durationAdjustable is only for video.template templates: video.short, video.eraser and image.pose render no chosen duration"
// +kubebuilder:validation:XValidation:rule="!self.durationAdjustable || !has(self.price)",message="price is for fixed-duration templates: an adjustable template is priced by durationPrices, and durations without an entry cost the default price"
// +kubebuilder:validation:XValidation:rule="!has(self.durationPrices) || !has(self.minDuration) || !has(self.maxDuration) || self.durationPrices.all(k, !k.matches('^[1-9][0-9]{0,3}$') || (int(k) >= self.minDuration && int(k) <= self.maxDuration))",message="durationPrices keys must lie within [minDuration, maxDuration]"
type TemplateSpec struct {
	// Capability is the kind of generation this template is used for.
	// +required
	Capability Capability `json:"capability"`

	// DisplayName is the human-readable name shown in the catalog: not blank, and, as a short
	// template's, no control characters, line separators, zero-width spaces or bidirectional
	// overrides.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[^\x00-\x1F\x7F-\x9F\x{061C}\x{200B}\x{200E}\x{200F}\x{2028}\x{2029}\x{202A}-\x{202E}\x{2066}-\x{2069}\x{FEFF}]*$`
	// +kubebuilder:validation:XValidation:rule="size(self.trim()) > 0",message="displayName must not be blank"
	// +required
	DisplayName string `json:"displayName"`

	// Price in points for fixed-duration templates (refused on adjustable ones, which are priced
	// by durationPrices). When unset, the system default price applies. At most 1000000000,
	// the most a top-up can credit.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self <= 1000000000",message="price must not exceed 1000000000 points, the most a top-up can credit"
	// +optional
	Price *int64 `json:"price,omitempty"`

	// CoverURL is an image shown for the template in catalogs.
	// +kubebuilder:validation:Pattern=`^https?://[^\x00-\x1f\x7f]*$`
	// +optional
	CoverURL string `json:"coverURL,omitempty"`

	// MediaURL is the template's media: the target video (video.short, video.template) or image
	// (image.pose), required for those; video.eraser works on the caller's video and needs none.
	// +kubebuilder:validation:Pattern=`^https?://[^\x00-\x1f\x7f]*$`
	// +optional
	MediaURL string `json:"mediaURL,omitempty"`

	// DurationAdjustable lets callers choose the output duration within [minDuration, maxDuration].
	// Only video.template renders a chosen duration, so only its templates may be adjustable.
	// +kubebuilder:default=false
	// +optional
	DurationAdjustable bool `json:"durationAdjustable,omitempty"`

	// MinDuration is the shortest selectable duration in seconds (adjustable templates only).
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinDuration *int32 `json:"minDuration,omitempty"`

	// MaxDuration is the longest selectable duration in seconds (adjustable templates only).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	MaxDuration *int32 `json:"maxDuration,omitempty"`

	// DurationPrices maps a duration in seconds (as a decimal string) to its price in points.
	// A duration in range without an entry costs the system default price. Each price is at most
	// 1000000000, the most a top-up can credit.
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[1-9][0-9]{0,3}$'))",message="keys must be durations in whole seconds, e.g. \"10\""
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k] >= 0)",message="prices must not be negative"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k] <= 1000000000)",message="prices must not exceed 1000000000 points, the most a top-up can credit"
	// +kubebuilder:validation:MaxProperties=256
	// +optional
	DurationPrices map[string]int64 `json:"durationPrices,omitempty"`
}

// TemplateStatus is the observed state of a Template.
type TemplateStatus struct {
	// Conditions of the template: Ready says whether a generation backend serves its
	// capability (reason Served, or NoBackend), and what a task on it costs; NoMedia when its
	// capability needs mediaURL and it has none (made before that was required).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Price is what a task on the template costs, in a few words, as the manager prices it
	// (its --default-price included): "30", "10 (default)", or an adjustable template's listed
	// durations and what the others cost, e.g. "5s=20, others 10 (default)".
	// +optional
	Price string `json:"price,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=vgt,categories=videogen
// +kubebuilder:printcolumn:name="Capability",type=string,JSONPath=`.spec.capability`
// +kubebuilder:printcolumn:name="Display Name",type=string,JSONPath=`.spec.displayName`
// +kubebuilder:printcolumn:name="Price",type=string,JSONPath=`.status.price`
// +kubebuilder:printcolumn:name="Adjustable",type=boolean,JSONPath=`.spec.durationAdjustable`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Media",type=string,priority=1,JSONPath=`.spec.mediaURL`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Template is an official catalog template, shared by all accounts.
type Template struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is one entry of the official template catalog: its capability, media and prices.
	// +required
	Spec TemplateSpec `json:"spec"`
	// status says whether a generation backend serves the template's capability, and what a task
	// on it costs.
	// +optional
	Status TemplateStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// TemplateList contains a list of Template.
type TemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Template `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Template{}, &TemplateList{})
}

package v1alpha1

// Capability names a kind of generation the service offers.
// +kubebuilder:validation:Enum=video.short;video.eraser;video.template;image.pose
type Capability string

const (
	// CapabilityShort swaps a face into a short template video.
	CapabilityShort Capability = "video.short"
	// CapabilityEraser removes static overlays (watermarks, logos, captions) from a video.
	CapabilityEraser Capability = "video.eraser"
	// CapabilityTemplate renders a template video at a chosen duration.
	CapabilityTemplate Capability = "video.template"
	// CapabilityPose places a face into a pose template image.
	CapabilityPose Capability = "image.pose"
)

// NeedsTemplateMedia reports whether a template of this capability needs spec.mediaURL (the
// video or image its tasks render on); video.eraser works on the caller's video.
func (c Capability) NeedsTemplateMedia() bool {
	return c == CapabilityShort || c == CapabilityTemplate || c == CapabilityPose
}

// HasDuration reports whether a task of this capability renders a duration the caller chooses
// (video.template): only such templates may be durationAdjustable. A video.short keeps its
// template video's length, video.eraser its source's, and image.pose makes an image.
func (c Capability) HasDuration() bool {
	return c == CapabilityTemplate
}

// MaxPoints bounds every amount of points an object names: a top-up's amount (either way) and
// every price of a Template. The CRDs' markers spell it out (1000000000), as markers cannot
// name a constant; TestMarkersBoundPointsByMaxPoints keeps them equal.
const MaxPoints int64 = 1_000_000_000

// Capabilities lists every capability, in the order the API documents them.
var Capabilities = []Capability{CapabilityShort, CapabilityEraser, CapabilityTemplate, CapabilityPose}

// Valid reports whether c is a known capability.
func (c Capability) Valid() bool {
	for _, known := range Capabilities {
		if c == known {
			return true
		}
	}
	return false
}

// Condition types and reasons shared by several kinds.
const (
	// ConditionReady says whether the object is usable.
	ConditionReady = "Ready"
)

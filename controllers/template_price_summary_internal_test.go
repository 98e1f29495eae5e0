package controllers

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// What breaks: the Ready condition of an adjustable template whose durationPrices price every
// duration of its range says "5 to 6 s: 2 durations priced, others at the default price of 10
// points": there are no others, and an administrator reading `kubectl describe template` (or
// a tenant shown it) is told some durations cost 10 when every one costs its own price. Its
// status.price (pricing.Summary) says it right: "5s=20, 6s=30". The count is also that of the
// map's keys, not of the durations in range that pricing.Quote would read.
//
// Input: a Template {durationAdjustable, minDuration 5, maxDuration 6, durationPrices
// {"5": 20, "6": 30}}, as the schema takes. Nothing races.
//
// What the user sees: a condition message contradicting the price column and what tasks cost.
func TestAFullyPricedAdjustableTemplatesReadyMessageNamesNoDefaultPrice(t *testing.T) {
	spec := videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityTemplate, DurationAdjustable: true,
		MinDuration: ptr.To[int32](5), MaxDuration: ptr.To[int32](6), DurationPrices: map[string]int64{"5": 20, "6": 30}}
	msg := priceSummary(spec, 10)
	if strings.Contains(msg, "default") || !strings.Contains(msg, "5s=20") || !strings.Contains(msg, "6s=30") {
		t.Errorf("Ready message %q; want each duration's price and no default price (every duration in [5, 6] is priced)", msg)
	}
	// One left without an entry still names the default price.
	spec.MaxDuration = ptr.To[int32](7)
	if msg := priceSummary(spec, 10); !strings.Contains(msg, "others 10 (default)") {
		t.Errorf("Ready message %q; want the default price of the unpriced duration 7", msg)
	}
}

package v1alpha1

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Markers cannot name a constant: every bound on points they spell out must be MaxPoints, so
// that no price can exceed what a top-up can credit.
func TestMarkersBoundPointsByMaxPoints(t *testing.T) {
	number := regexp.MustCompile(`-?\d{7,}`)
	want := map[string]int{"pointtopup_types.go": 2, "template_types.go": 2}
	for file, atLeast := range want {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for line := range strings.Lines(string(src)) {
			if !strings.Contains(line, "+kubebuilder:validation:") {
				continue
			}
			for _, n := range number.FindAllString(line, -1) {
				v, err := strconv.ParseInt(strings.TrimPrefix(n, "-"), 10, 64)
				if err != nil || v != MaxPoints {
					t.Errorf("%s: bound %s is not MaxPoints (%d): %s", file, n, MaxPoints, strings.TrimSpace(line))
				}
				found++
			}
		}
		if found < atLeast {
			t.Errorf("%s: %d bounds of MaxPoints in markers, want at least %d", file, found, atLeast)
		}
	}
}

// Only a capability that renders a chosen duration may have adjustable templates: the CRD rule
// that says so names exactly the capabilities whose HasDuration is true.
func TestAdjustableRuleNamesTheCapabilitiesWithADuration(t *testing.T) {
	src, err := os.ReadFile("template_types.go")
	if err != nil {
		t.Fatal(err)
	}
	var rule string
	for line := range strings.Lines(string(src)) {
		if strings.Contains(line, `rule="!self.durationAdjustable || self.capability == `) {
			rule = line
		}
	}
	if rule == "" {
		t.Fatal("no rule restricting durationAdjustable to some capabilities")
	}
	for _, c := range Capabilities {
		named := strings.Contains(rule, "self.capability == '"+string(c)+"'")
		if named != c.HasDuration() {
			t.Errorf("the rule names %s: %v, but %s.HasDuration() is %v", c, named, c, c.HasDuration())
		}
	}
}

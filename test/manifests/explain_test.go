package manifests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// The condition types each kind sets: `kubectl explain <kind>.status.conditions` names them all.
var conditionTypes = map[string][]string{
	"VideoTask": {videogenv1alpha1.ConditionAccepted, videogenv1alpha1.ConditionDispatched,
		videogenv1alpha1.ConditionSucceeded, videogenv1alpha1.ConditionFailed},
	"PointAccount":  {videogenv1alpha1.ConditionReady, videogenv1alpha1.ConditionFunded},
	"PointTopUp":    {videogenv1alpha1.ConditionApplied},
	"PaymentEvent":  {videogenv1alpha1.ConditionProcessed, videogenv1alpha1.ConditionForwarded},
	"Template":      {videogenv1alpha1.ConditionReady},
	"ShortTemplate": {videogenv1alpha1.ConditionReady},
}

// A line that starts a list item, which may follow a line of its paragraph.
var listItem = regexp.MustCompile(`^\s*([-*]|\d+\.)\s`)

// A figure with a unit of time or rate, as benchmark results are written.
var figure = regexp.MustCompile(`\d+(\.\d+)?\s?(ms|µs|ns|tasks/s|/s|%)(\W|$)|\bbenchmark`)

// What `kubectl explain` shows is written for users: prose without line breaks inside a
// paragraph (controller-gen keeps those of the Go comments; hack/crddoc joins them), no
// benchmark figures, and every condition type of the kind.
func TestExplainTextsReadAsProse(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs: %v", err)
	}
	seen := map[string]bool{}
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		kind := crd.Spec.Names.Kind
		seen[kind] = true
		for _, v := range crd.Spec.Versions {
			schema := v.Schema.OpenAPIV3Schema
			walkDescriptions(kind, schema, func(at, d string) {
				lines := strings.Split(d, "\n")
				for i := 1; i < len(lines); i++ {
					if lines[i] != "" && lines[i-1] != "" && !listItem.MatchString(lines[i]) {
						t.Errorf("%s: a line break inside a paragraph (make manifests joins them): %q", at, d)
						break
					}
				}
				if figure.MatchString(d) {
					t.Errorf("%s: reads like a benchmark figure: %q", at, d)
				}
			})
			conds := schema.Properties["status"].Properties["conditions"]
			for _, want := range conditionTypes[kind] {
				if !regexp.MustCompile(`\b` + want + `\b`).MatchString(conds.Description) {
					t.Errorf("%s.status.conditions does not name the %s condition: %q", kind, want, conds.Description)
				}
			}
		}
	}
	for kind := range conditionTypes {
		if !seen[kind] {
			t.Errorf("no CRD for %s", kind)
		}
	}
}

func walkDescriptions(at string, s *apiextensionsv1.JSONSchemaProps, visit func(at, description string)) {
	if s == nil {
		return
	}
	if s.Description != "" {
		visit(at, s.Description)
	}
	for name, p := range s.Properties {
		walkDescriptions(at+"."+name, &p, visit)
	}
	if s.Items != nil {
		walkDescriptions(at+"[]", s.Items.Schema, visit)
	}
	if s.AdditionalProperties != nil {
		walkDescriptions(at+"{}", s.AdditionalProperties.Schema, visit)
	}
}

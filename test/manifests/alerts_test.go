package manifests

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/videogen-dev/videogen-operator/internal/metricnames"
)

// The alerts docs/deploy.md promises, each over metrics the manager or the apiserver registers,
// with a severity and texts an on-call engineer can act on.
func TestAlertsQueryRegisteredMetrics(t *testing.T) {
	var rules []map[string]any
	for _, u := range renderFrom(t, "config/prometheus") {
		if u.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "groups")
		for _, g := range groups {
			rs, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
			for _, r := range rs {
				rules = append(rules, r.(map[string]any))
			}
		}
	}
	var names []string
	for _, r := range rules {
		alert, _, _ := unstructured.NestedString(r, "alert")
		expr, _, _ := unstructured.NestedString(r, "expr")
		severity, _, _ := unstructured.NestedString(r, "labels", "severity")
		summary, _, _ := unstructured.NestedString(r, "annotations", "summary")
		description, _, _ := unstructured.NestedString(r, "annotations", "description")
		names = append(names, alert)
		metrics := metricnames.In(expr)
		if len(metrics) == 0 {
			t.Errorf("alert %s queries no videogen metric: %s", alert, expr)
		}
		for _, m := range metrics {
			if !metricnames.Registered(m) {
				t.Errorf("alert %s queries %s, which neither the manager nor the apiserver registers", alert, m)
			}
		}
		if severity != "warning" && severity != "critical" {
			t.Errorf("alert %s: severity %q, want warning or critical", alert, severity)
		}
		if summary == "" || description == "" {
			t.Errorf("alert %s needs a summary and a description", alert)
		}
	}
	for _, want := range []string{
		"VideogenCompletionWebhooksFailing", "VideogenTasksWaitingWithoutBackend", "VideogenLedgerInvariantBroken",
		"VideogenPaymentEventForwardingFailing", "VideogenAPIErrors",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("no alert %s in config/prometheus (have %v)", want, names)
		}
	}
}

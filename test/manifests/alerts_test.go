package manifests

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/videogen-dev/videogen-operator/internal/metricnames"
)

// The alerts docs/deploy.md promises, each over metrics the manager or the apiserver registers,
// with a severity and texts an on-call engineer can act on.
func TestAlertsQueryRegisteredMetrics(t *testing.T) {
	rules := alertRules(t)
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
		"VideogenPaymentEventForwardingFailing", "VideogenAPIErrors", "VideogenLedgerUnavailable",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("no alert %s in config/prometheus (have %v)", want, names)
		}
	}
}

// VideogenLedgerUnavailable fires when the ledger does not answer a replica's calls for minutes,
// and never on a failover's blip: each call retries for up to 15 s, a failover fails calls for
// well under a minute, and the failures stay in the rate window for its length after; `for`
// must outlast the window by a minute, so that no blip shorter than that can fire it.
func TestTheLedgerAlertOutlastsAFailover(t *testing.T) {
	var rule map[string]any
	for _, r := range alertRules(t) {
		if alert, _, _ := unstructured.NestedString(r, "alert"); alert == "VideogenLedgerUnavailable" {
			rule = r
		}
	}
	if rule == nil {
		t.Fatal("no alert VideogenLedgerUnavailable in config/prometheus")
	}
	expr, _, _ := unstructured.NestedString(rule, "expr")
	forText, _, _ := unstructured.NestedString(rule, "for")
	severity, _, _ := unstructured.NestedString(rule, "labels", "severity")
	description, _, _ := unstructured.NestedString(rule, "annotations", "description")

	hold, err := time.ParseDuration(forText)
	if err != nil {
		t.Fatalf("for %q: %v", forText, err)
	}
	var window time.Duration
	for _, m := range regexp.MustCompile(`\[([0-9]+[smh])\]`).FindAllStringSubmatch(expr, -1) {
		d, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatal(err)
		}
		window = max(window, d)
	}
	if window == 0 {
		t.Fatalf("no rate window in %s", expr)
	}
	if hold < window+time.Minute {
		t.Errorf("for: %v, with a %v window: failures of a blip under a minute would hold it for long enough to fire; want for >= %v", hold, window, window+time.Minute)
	}
	if hold > 10*time.Minute {
		t.Errorf("for: %v: an outage of every task submission goes unannounced that long", hold)
	}
	for _, outcome := range []string{"unavailable", "no_answer"} {
		if !strings.Contains(expr, outcome) {
			t.Errorf("the expression does not count outcome %s: %s", outcome, expr)
		}
	}
	// A refusal is the ledger working: counted in the denominator, never as a failure.
	if sel := regexp.MustCompile(`outcome=~"([^"]*)"`).FindStringSubmatch(expr); sel == nil || strings.Contains(sel[1], "refused") || strings.Contains(sel[1], "ok") {
		t.Errorf("the failing calls' selector must name the failures only: %s", expr)
	}
	if !strings.Contains(expr, "by (namespace, pod)") {
		t.Errorf("the alert must name the replica (by (namespace, pod)): %s", expr)
	}
	if severity != "critical" {
		t.Errorf("severity %q: no task can be created, want critical", severity)
	}
	for _, what := range []string{"manager pods", "Lease", "--ledger-url", "--ledger-token-file", "--ledger-bind-address"} {
		if !strings.Contains(description, what) {
			t.Errorf("the description does not tell on-call to look at %s: %s", what, description)
		}
	}
}

// alertRules returns the rules of the PrometheusRules config/prometheus renders.
func alertRules(t *testing.T) []map[string]any {
	t.Helper()
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
	return rules
}

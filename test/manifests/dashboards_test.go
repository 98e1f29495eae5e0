package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/metricnames"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// The Grafana dashboard (config/grafana/videogen.json) queries only metrics the binaries
// register, so a renamed metric cannot leave a panel silently empty.

func TestEveryPanelQueriesARegisteredMetric(t *testing.T) {
	queried := dashboardQueries(t)
	if len(queried) < 10 {
		t.Fatalf("found only %d metrics in the dashboard's queries: %v", len(queried), queried)
	}
	names := make([]string, 0, len(queried))
	for name := range queried {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !metricnames.Registered(name) {
			t.Errorf("panels %q query %s, which neither the manager nor the apiserver registers", queried[name], name)
		}
	}
}

// The REST API row shows what the apiserver measures of its own work, the calls to the points
// ledger with it: during a manager outage its panel tells a ledger that does not answer from
// one that refuses (insufficient balance), which the requests' 503s and 402s alone do not.
func TestTheDashboardShowsTheAPIServersMetrics(t *testing.T) {
	queried := dashboardQueries(t)
	for _, name := range []string{"videogen_api_requests_total", "videogen_api_request_duration_seconds", "videogen_api_ledger_calls_total"} {
		if len(queried[name]) == 0 {
			t.Errorf("no panel of config/grafana/videogen.json queries %s", name)
		}
	}
}

// dashboardQueries returns the metrics the dashboard's panels query, each with those panels' titles.
func dashboardQueries(t *testing.T) map[string][]string {
	t.Helper()
	raw := dashboardJSON(t)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("videogen.json: %v", err)
	}
	queried := map[string][]string{} // metric → panels
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			for _, name := range metricnames.In(target.Expr) {
				queried[name] = append(queried[name], p.Title)
			}
		}
	}
	return queried
}

// The dashboard's variables list label values of registered metrics too. The capability list
// comes from videogen_capability_served, which has a series for every capability a backend
// serves: videogen_tasks has series only while tasks are open, so an idle capability (the one
// an on-call engineer checks when nothing runs) was missing from the list.
func TestTheDashboardsVariablesQueryRegisteredMetrics(t *testing.T) {
	raw := dashboardJSON(t)
	var dash struct {
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("videogen.json: %v", err)
	}
	seen := map[string][]string{} // variable → metrics
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, ok := v.Query.(map[string]any)
		if !ok {
			t.Fatalf("variable %s: query %v is not Prometheus' query object", v.Name, v.Query)
		}
		expr, _ := q["query"].(string)
		names := metricnames.In(expr)
		if len(names) == 0 {
			t.Errorf("variable %s queries no metric: %q", v.Name, expr)
		}
		for _, name := range names {
			if !metricnames.Registered(name) {
				t.Errorf("variable %s queries %s, which neither the manager nor the apiserver registers", v.Name, name)
			}
		}
		seen[v.Name] = names
	}
	if got := seen["capability"]; len(got) != 1 || got[0] != "videogen_capability_served" {
		t.Errorf("the capability variable lists %v, want the capabilities of videogen_capability_served", got)
	}
}

// dashboardJSON is config/grafana/videogen.json as it is in the checkout.
func dashboardJSON(t *testing.T) []byte {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "grafana", "videogen.json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

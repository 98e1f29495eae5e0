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
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "grafana", "videogen.json"))
	if err != nil {
		t.Fatal(err)
	}
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

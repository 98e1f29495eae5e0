// Package dashboards_test checks videogen.json against the metrics the binaries register, so
// a renamed metric cannot leave a panel silently empty.
package dashboards_test

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/videogen-dev/videogen-operator/apiserver"
	"github.com/videogen-dev/videogen-operator/apiserver/webhookingress"
	_ "github.com/videogen-dev/videogen-operator/controllers" // registers the manager's metrics
)

// metricName finds the metric names in a PromQL expression (not label names or functions).
var metricName = regexp.MustCompile(`\b((?:videogen|controller_runtime|workqueue)_[a-z0-9_]+)\b`)

func TestEveryPanelQueriesARegisteredMetric(t *testing.T) {
	raw, err := os.ReadFile("videogen.json")
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

	// The manager registers on controller-runtime's registry; the apiserver on its own.
	apiRegistry := prometheus.NewRegistry()
	apiserver.New(apiserver.Config{Registerer: apiRegistry})
	if _, err := webhookingress.NewMetrics(apiRegistry); err != nil {
		t.Fatal(err)
	}

	queried := map[string][]string{} // metric → panels
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			for _, m := range metricName.FindAllStringSubmatch(target.Expr, -1) {
				name := strings.TrimSuffix(m[1], "_bucket")
				queried[name] = append(queried[name], p.Title)
			}
		}
	}
	if len(queried) < 10 {
		t.Fatalf("found only %d metrics in the dashboard's queries: %v", len(queried), queried)
	}
	names := make([]string, 0, len(queried))
	for name := range queried {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !registered(crmetrics.Registry, name) && !registered(apiRegistry, name) {
			t.Errorf("panels %q query %s, which neither the manager nor the apiserver registers", queried[name], name)
		}
	}
}

// registered says whether reg has a metric called name: registering another one of that name
// with a different help text is refused exactly then.
func registered(reg prometheus.Registerer, name string) bool {
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe " + name, ConstLabels: prometheus.Labels{"probe": "x"}})
	if err := reg.Register(probe); err != nil {
		return true
	}
	reg.Unregister(probe)
	return false
}

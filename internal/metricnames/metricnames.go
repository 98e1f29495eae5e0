// Package metricnames is for tests of what queries the project's metrics (the Grafana dashboard,
// the Prometheus alerts): it finds metric names in PromQL and says whether the manager or the
// apiserver registers them, so a renamed metric cannot leave a panel empty or an alert silent.
package metricnames

import (
	"regexp"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/videogen-dev/videogen-operator/apiserver"
	"github.com/videogen-dev/videogen-operator/apiserver/webhookingress"
	_ "github.com/videogen-dev/videogen-operator/controllers" // registers the manager's metrics
)

// metricName matches the project's and controller-runtime's metric names in a PromQL
// expression (not label names or functions).
var metricName = regexp.MustCompile(`\b((?:videogen|controller_runtime|workqueue)_[a-z0-9_]+)\b`)

// In returns the metric names expr queries, histogram series (_bucket, _sum, _count) under
// the histogram's name.
func In(expr string) []string {
	var names []string
	for _, m := range metricName.FindAllStringSubmatch(expr, -1) {
		name := m[1]
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && Registered(base) {
				name = base
			}
		}
		names = append(names, name)
	}
	return names
}

var apiRegistry = sync.OnceValue(func() *prometheus.Registry {
	// The manager registers on controller-runtime's registry; the apiserver on its own.
	reg := prometheus.NewRegistry()
	apiserver.New(apiserver.Config{Registerer: reg})
	if _, err := webhookingress.NewMetrics(reg); err != nil {
		panic(err)
	}
	return reg
})

// Registered says whether the manager or the apiserver registers a metric called name.
func Registered(name string) bool {
	return registered(crmetrics.Registry, name) || registered(apiRegistry(), name)
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

package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// capabilityServed says per capability whether --backends-config routes it to a backend, so an
// alert can tell tasks waiting for a busy backend from tasks that no backend will ever take.
var capabilityServed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "videogen_capability_served",
	Help: "1 if a generation backend serves the capability (--backends-config), 0 if its tasks can only wait and time out.",
}, []string{"capability"})

func init() {
	metrics.Registry.MustRegister(capabilityServed)
}

// recordServedCapabilities sets videogen_capability_served for every capability.
func recordServedCapabilities(backends generation.Router) {
	for _, c := range videogenv1alpha1.Capabilities {
		served := 0.0
		if _, _, ok := backends.Route(c); ok {
			served = 1
		}
		capabilityServed.WithLabelValues(string(c)).Set(served)
	}
}

package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Payment event metrics, on the manager's /metrics endpoint. Labels are bounded: connectors and
// event types are fixed sets, sinks come from the configuration.
var (
	paymentEventsProcessed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "videogen_payment_events_processed_total",
		Help: "Payment events recorded by the controller, by connector and normalized event type.",
	}, []string{"connector", "event_type"})
	paymentEventDeliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "videogen_payment_event_deliveries_total",
		Help: "Delivery attempts to sinks by outcome, counted once the status records them: delivered, retry, gone (410), gave_up (attempts exhausted), sink_removed.",
	}, []string{"sink", "outcome"})
)

func init() {
	metrics.Registry.MustRegister(paymentEventsProcessed, paymentEventDeliveries)
}

package webhookingress

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a delivery, as metric label values.
const (
	outcomeStored           = "stored"
	outcomeDuplicate        = "duplicate"
	outcomeConflict         = "conflict"
	outcomeInvalidSignature = "invalid_signature"
	outcomeInvalidRequest   = "invalid_request"
	outcomeNotFound         = "not_found"
	outcomePayloadTooLarge  = "payload_too_large"
	outcomeUnsupportedMedia = "unsupported_media_type"
	outcomeStoreFailed      = "store_failed"
	outcomeUnavailable      = "unavailable"
	outcomeInternal         = "internal_error"
)

// Metrics counts deliveries. The connector label is a registered connector name or "unknown",
// so a caller cannot create label values at will.
type Metrics struct {
	receivedTotal *prometheus.CounterVec
	verifiedTotal *prometheus.CounterVec
	duplicates    *prometheus.CounterVec
	outcomes      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
}

// NewMetrics creates the ingress metrics and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		receivedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "videogen_webhook_received_total",
			Help: "Webhook deliveries received for a known connector.",
		}, []string{"connector"}),
		verifiedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "videogen_webhook_verified_total",
			Help: "Webhook deliveries whose signature verified and whose body parsed.",
		}, []string{"connector"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "videogen_webhook_duplicates_total",
			Help: "Verified deliveries of an event that was already stored (acknowledged, not stored again).",
		}, []string{"connector"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "videogen_webhook_requests_total",
			Help: "Webhook requests by connector and outcome: stored, duplicate, or the rejection (conflict: another event with the same id is stored; invalid_signature, invalid_request, not_found, payload_too_large, unsupported_media_type, store_failed, unavailable, internal_error).",
		}, []string{"connector", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "videogen_webhook_request_duration_seconds",
			Help:    "Time from request to answer, by outcome.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
		}, []string{"outcome"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.receivedTotal, m.verifiedTotal, m.duplicates, m.outcomes, m.duration} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *Metrics) received(connector string) {
	if m != nil {
		m.receivedTotal.WithLabelValues(connector).Inc()
	}
}

func (m *Metrics) verified(connector string) {
	if m != nil {
		m.verifiedTotal.WithLabelValues(connector).Inc()
	}
}

func (m *Metrics) done(connector, outcome string, start time.Time) {
	if m == nil {
		return
	}
	if outcome == outcomeDuplicate {
		m.duplicates.WithLabelValues(connector).Inc()
	}
	m.outcomes.WithLabelValues(connector, outcome).Inc()
	m.duration.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
}

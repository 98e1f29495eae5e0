package paymentevents

import (
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/videogen-dev/videogen-operator/internal/outbound"
)

// Retry defaults: 5s, 10s, 20s … doubling up to an hour, 12 attempts in all (about 2.5 hours).
const (
	DefaultInitialBackoff = 5 * time.Second
	DefaultMaxBackoff     = time.Hour
	DefaultMaxAttempts    = 12
)

// RetryPolicy is how failed deliveries are retried: exponential backoff with jitter, up to
// MaxAttempts attempts in all.
type RetryPolicy struct {
	InitialBackoff metav1.Duration `json:"initialBackoff,omitempty"`
	MaxBackoff     metav1.Duration `json:"maxBackoff,omitempty"`
	MaxAttempts    int32           `json:"maxAttempts,omitempty"`
}

// WithDefaults fills unset fields.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	if p.InitialBackoff.Duration == 0 {
		p.InitialBackoff.Duration = DefaultInitialBackoff
	}
	if p.MaxBackoff.Duration == 0 {
		p.MaxBackoff.Duration = DefaultMaxBackoff
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	return p
}

func (p RetryPolicy) validate() error {
	if p.InitialBackoff.Duration < 0 || p.MaxBackoff.Duration < p.InitialBackoff.Duration {
		return errors.New("payment event sinks: retry: need 0 < initialBackoff <= maxBackoff")
	}
	if p.MaxAttempts < 1 || p.MaxAttempts > 100 {
		return errors.New("payment event sinks: retry: maxAttempts must be between 1 and 100")
	}
	return nil
}

// Delay is the wait after the given failed attempt (1 for the first): the exponential step
// min(MaxBackoff, InitialBackoff·2^(attempt-1)), scaled by a jitter in [0.5, 1] so that
// deliveries failed together do not retry together. jitter is a random number in [0, 1).
func (p RetryPolicy) Delay(attempt int32, jitter float64) time.Duration {
	return outbound.Exponential(p.InitialBackoff.Duration, p.MaxBackoff.Duration, attempt, jitter)
}

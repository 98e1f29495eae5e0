package paymentevents

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/all"
	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

// MaxPreviousSecrets bounds a sink's previousSecrets.
const MaxPreviousSecrets = 4

// MinSecretBytes is the shortest key a sink's secret (or previous secret) may have: Standard
// Webhooks' minimum. A shorter key is recovered offline from one signed delivery, and with it
// any delivery can be forged.
const MinSecretBytes = 24

// DefaultSinkTimeout bounds one delivery attempt when a sink sets no timeout.
const DefaultSinkTimeout = 10 * time.Second

// SinkConfig is the sink configuration file (--payment-event-sinks), YAML or JSON:
//
//	sinks:
//	- name: billing                      # DNS label; shown in status, events and metrics
//	  url: https://billing.example/hooks # POSTed to, signed with Standard Webhooks
//	  secret: whsec_…                    # base64 key after whsec_, at least 24 bytes
//	  previousSecrets: [whsec_…]         # optional, during a rotation: they sign too
//	  eventTypes: [DISPUTE_CREATED]      # optional filter (normalized types); empty: all
//	  connectors: [stripe]               # optional filter (connector names); empty: all
//	  timeout: 10s                       # optional, per attempt
//	retry:                               # optional, see RetryPolicy
//	  initialBackoff: 5s
//	  maxBackoff: 1h
//	  maxAttempts: 12
type SinkConfig struct {
	Sinks []Sink      `json:"sinks"`
	Retry RetryPolicy `json:"retry,omitempty"`
}

// Sink is one HTTP endpoint payment events are forwarded to.
type Sink struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	Secret string `json:"secret"`
	// PreviousSecrets sign every attempt too (one more v1 signature each), so that a receiver
	// that has not switched to Secret yet still verifies it: a rotation without a window in
	// which the sink rejects every event.
	PreviousSecrets []string        `json:"previousSecrets,omitempty"`
	EventTypes      []string        `json:"eventTypes,omitempty"`
	Connectors      []string        `json:"connectors,omitempty"`
	Timeout         metav1.Duration `json:"timeout,omitempty"`
}

// ParseSinkConfig reads a configuration, rejecting unknown fields (a typo must not silently
// drop a filter), fills defaults and validates it.
func ParseSinkConfig(data []byte) (*SinkConfig, error) {
	var cfg SinkConfig
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fmt.Errorf("payment event sinks: %w", err)
	}
	cfg.Retry = cfg.Retry.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	for i := range cfg.Sinks {
		if cfg.Sinks[i].Timeout.Duration == 0 {
			cfg.Sinks[i].Timeout.Duration = DefaultSinkTimeout
		}
	}
	return &cfg, nil
}

// connectorNames are the connectors the webhook ingress serves, the only values a
// PaymentEvent's spec.connector takes.
var connectorNames = func() []string {
	var names []string
	for _, c := range all.Connectors() {
		names = append(names, c.Name())
	}
	slices.Sort(names)
	return names
}()

func (c *SinkConfig) validate() error {
	if len(c.Sinks) > videogenv1alpha1.PaymentEventMaxSinks {
		return fmt.Errorf("payment event sinks: %d sinks configured, at most %d are allowed", len(c.Sinks), videogenv1alpha1.PaymentEventMaxSinks)
	}
	seen := map[string]bool{}
	var errs []error
	for i, s := range c.Sinks {
		where := fmt.Sprintf("payment event sinks: sinks[%d] (%q)", i, s.Name)
		if msgs := validation.IsDNS1123Label(s.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s: name must be a DNS label: %v", where, msgs))
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("%s: name is used twice", where))
		}
		seen[s.Name] = true
		if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s: url must be an absolute http or https URL", where))
		}
		if err := checkSecret(s.Secret); err != nil {
			errs = append(errs, fmt.Errorf("%s: secret: %w", where, err))
		}
		if len(s.PreviousSecrets) > MaxPreviousSecrets {
			errs = append(errs, fmt.Errorf("%s: previousSecrets: %d given, at most %d", where, len(s.PreviousSecrets), MaxPreviousSecrets))
		}
		for j, p := range s.PreviousSecrets {
			if err := checkSecret(p); err != nil {
				errs = append(errs, fmt.Errorf("%s: previousSecrets[%d]: %w", where, j, err))
			}
		}
		if s.Timeout.Duration < 0 || s.Timeout.Duration > time.Minute {
			errs = append(errs, fmt.Errorf("%s: timeout must be between 0 and 1m", where))
		}
		// A filter value no event carries would silently keep the sink from every event, for
		// good: sinks are chosen when an event is recorded.
		for _, t := range s.EventTypes {
			if !slices.Contains(connectors.EventTypes, connectors.EventType(t)) {
				errs = append(errs, fmt.Errorf("%s: eventTypes: %q is not a normalized event type (one of %v)", where, t, connectors.EventTypes))
			}
		}
		// A misspelt connector of the right form ("strpe") is as silent a loss.
		for _, c := range s.Connectors {
			if !slices.Contains(connectorNames, c) {
				errs = append(errs, fmt.Errorf("%s: connectors: %q is not a connector name (one of %v, lower-case, as in the webhook path)", where, c, connectorNames))
			}
		}
	}
	if err := c.Retry.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkSecret says whether secret is a whsec_ secret with a key of at least MinSecretBytes.
func checkSecret(secret string) error {
	key, err := standardwebhooks.DecodeSecret(secret)
	if err != nil {
		return err
	}
	if len(key) < MinSecretBytes {
		return fmt.Errorf("the key is %d bytes, it must be at least %d bytes (e.g. whsec_ and the output of `openssl rand -base64 32`)", len(key), MinSecretBytes)
	}
	return nil
}

// Find returns the sink named name.
func (c *SinkConfig) Find(name string) (Sink, bool) {
	if c == nil {
		return Sink{}, false
	}
	for _, s := range c.Sinks {
		if s.Name == name {
			return s, true
		}
	}
	return Sink{}, false
}

// Accepts reports whether the sink's filters let the event through.
func (s Sink) Accepts(spec *videogenv1alpha1.PaymentEventSpec) bool {
	return (len(s.EventTypes) == 0 || slices.Contains(s.EventTypes, spec.EventType)) &&
		(len(s.Connectors) == 0 || slices.Contains(s.Connectors, spec.Connector))
}

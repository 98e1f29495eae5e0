// Package stripe verifies and normalizes Stripe webhooks.
//
// Scheme (https://docs.stripe.com/webhooks#verify-manually): the
// Stripe-Signature header is "t=<unix>,v1=<hex>[,v1=<hex>...]"; each v1 is
// hex(HMAC-SHA256(secret, "<t>.<raw body>")) where secret is the endpoint's
// "whsec_..." string used as-is. v0 and unknown keys are ignored. Several v1
// values appear while Stripe rolls an endpoint secret.
package stripe

import (
	"strconv"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/internal/sig"
)

// Name is the registry key.
const Name = "stripe"

// SignatureHeader carries the timestamp and signatures.
const SignatureHeader = "Stripe-Signature"

// DefaultTolerance is how far the signed timestamp may be from now, in
// either direction; stripe-go uses the same default.
const DefaultTolerance = 300 * time.Second

// Connector is the Stripe connector. Create it with New.
type Connector struct {
	tolerance time.Duration
}

// Option configures a Connector.
type Option func(*Connector)

// WithTolerance sets the replay window. Values <= 0 keep DefaultTolerance:
// the timestamp check cannot be switched off.
func WithTolerance(d time.Duration) Option {
	return func(c *Connector) {
		if d > 0 {
			c.tolerance = d
		}
	}
}

// New returns a Stripe connector.
func New(opts ...Option) *Connector {
	c := &Connector{tolerance: DefaultTolerance}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Name implements connectors.Connector.
func (c *Connector) Name() string { return Name }

// Verify implements connectors.Connector.
func (c *Connector) Verify(req *connectors.Request, secrets [][]byte, now time.Time) error {
	keys := sig.Usable(secrets)
	if len(keys) == 0 {
		return authErr("no webhook secret configured")
	}
	raw := req.Header(SignatureHeader)
	if raw == "" {
		return authErr("missing " + SignatureHeader + " header")
	}
	h, reason := parseHeader(raw)
	if reason != "" {
		return authErr("malformed " + SignatureHeader + " header: " + reason)
	}
	signedAt := time.Unix(h.timestamp, 0)
	if age := now.Sub(signedAt); age > c.tolerance || age < -c.tolerance {
		return authErr("timestamp " + strconv.FormatInt(h.timestamp, 10) +
			" outside tolerance of " + c.tolerance.String())
	}
	prefix := []byte(strconv.FormatInt(h.timestamp, 10) + ".")
	mac := func(key []byte) []byte { return sig.HMACSHA256(key, prefix, req.Body) }
	if !sig.Match(keys, h.v1, mac) {
		return authErr("no v1 signature matches any configured secret")
	}
	return nil
}

func authErr(reason string) error {
	return &connectors.AuthError{Connector: Name, Reason: reason}
}

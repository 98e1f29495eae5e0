// Package authorizenet verifies and normalizes Authorize.net webhooks.
//
// Scheme (https://developer.authorize.net/api/reference/features/webhooks.html):
// the X-ANET-Signature header is "sha512=" + hex(HMAC-SHA512(signature key,
// raw body)); Authorize.net sends the hex in upper case.
//
// The key is the Signature Key text exactly as shown in the Merchant
// Interface, NOT hex-decoded. The official page does not say which; a real
// delivery published on Authorize.net's developer forum (see
// verify_test.go) matches only the literal text, and the hex-decoded key
// belongs to the older SIM/DPM transaction hash, a different protocol.
package authorizenet

import (
	"strings"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/internal/norm"
	"github.com/videogen-dev/videogen-operator/internal/connectors/internal/sig"
)

// Name is the registry key.
const Name = "authorizenet"

// SignatureHeader carries "sha512=<hex>".
const SignatureHeader = "X-ANET-Signature"

// Connector is the Authorize.net connector. Create it with New.
type Connector struct {
	currency string
}

// Option configures a Connector.
type Option func(*Connector)

// WithCurrency sets the account's currency. Authorize.net webhooks carry no
// currency (each gateway account settles in one), so without this option
// events have an empty Currency.
func WithCurrency(code string) Option {
	return func(c *Connector) { c.currency = norm.Currency(code) }
}

// New returns an Authorize.net connector.
func New(opts ...Option) *Connector {
	c := &Connector{}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Name implements connectors.Connector.
func (c *Connector) Name() string { return Name }

// Verify implements connectors.Connector. Authorize.net signs no timestamp,
// so replays can only be caught by de-duplicating on MerchantEventID.
func (c *Connector) Verify(req *connectors.Request, secrets [][]byte, _ time.Time) error {
	mac := func(key []byte) []byte { return sig.HMACSHA512(key, req.Body) }
	if reason := scheme.Verify(req.Header(SignatureHeader), secrets, mac); reason != "" {
		return authErr(reason)
	}
	return nil
}

// scheme: "sha512=<hex>" (any case) of the raw body's HMAC-SHA512 in one header.
var scheme = sig.HeaderScheme{Header: SignatureHeader, Format: `"sha512=<hex>"`, Decode: func(value string) ([]byte, bool) {
	algo, mac, ok := strings.Cut(value, "=")
	if !ok || !strings.EqualFold(algo, "sha512") {
		return nil, false
	}
	return sig.Hex(mac)
}}

func authErr(reason string) error { return &connectors.AuthError{Connector: Name, Reason: reason} }

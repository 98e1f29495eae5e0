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
	"encoding/hex"
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
	keys := sig.Usable(secrets)
	if len(keys) == 0 {
		return authErr("no webhook secret configured")
	}
	raw := strings.TrimSpace(req.Header(SignatureHeader))
	if raw == "" {
		return authErr("missing " + SignatureHeader + " header")
	}
	algo, value, ok := strings.Cut(raw, "=")
	if !ok || !strings.EqualFold(algo, "sha512") {
		return authErr(SignatureHeader + " header is not \"sha512=<hex>\"")
	}
	got, err := hex.DecodeString(value) // accepts upper and lower case
	if err != nil {
		return authErr(SignatureHeader + " header is not \"sha512=<hex>\"")
	}
	mac := func(key []byte) []byte { return sig.HMACSHA512(key, req.Body) }
	if !sig.Match(keys, [][]byte{got}, mac) {
		return authErr("signature matches no configured secret")
	}
	return nil
}

func authErr(reason string) error { return &connectors.AuthError{Connector: Name, Reason: reason} }

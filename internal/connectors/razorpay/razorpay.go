// Package razorpay verifies and normalizes Razorpay webhooks.
//
// Scheme (https://razorpay.com/docs/webhooks/validate-test/): the
// X-Razorpay-Signature header is hex(HMAC-SHA256(webhook secret, raw body)).
// The body is signed byte for byte, trailing newline included.
package razorpay

import (
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/internal/sig"
)

// Name is the registry key.
const Name = "razorpay"

// SignatureHeader carries the body's HMAC. (Razorpay's X-Razorpay-Event-Id
// header is not used: it is not signed; see Parse.)
const SignatureHeader = "X-Razorpay-Signature"

// Connector is the Razorpay connector. It has no options; create it with New.
type Connector struct{}

// New returns a Razorpay connector.
func New() *Connector { return &Connector{} }

// Name implements connectors.Connector.
func (c *Connector) Name() string { return Name }

// Verify implements connectors.Connector. Razorpay signs no timestamp, so
// replays can only be caught by de-duplicating on MerchantEventID.
func (c *Connector) Verify(req *connectors.Request, secrets [][]byte, _ time.Time) error {
	mac := func(key []byte) []byte { return sig.HMACSHA256(key, req.Body) }
	if reason := scheme.Verify(req.Header(SignatureHeader), secrets, mac); reason != "" {
		return authErr(reason)
	}
	return nil
}

// scheme: a hex HMAC-SHA256 of the raw body in one header.
var scheme = sig.HeaderScheme{Header: SignatureHeader, Format: "hex", Decode: sig.Hex}

func authErr(reason string) error { return &connectors.AuthError{Connector: Name, Reason: reason} }

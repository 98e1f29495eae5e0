// Package checkout verifies and normalizes Checkout.com webhooks.
//
// Scheme (https://www.checkout.com/docs/developer-resources/webhooks/manage-webhooks/set-up-your-webhook-receiver):
// the Cko-Signature header is hex(HMAC-SHA256(signature key, raw body)),
// with the signature key configured on the webhook used as-is.
package checkout

import (
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/internal/sig"
)

// Name is the registry key.
const Name = "checkout"

// SignatureHeader carries the signature.
const SignatureHeader = "Cko-Signature"

// Connector is the Checkout.com connector. It has no options; create it
// with New.
type Connector struct{}

// New returns a Checkout.com connector.
func New() *Connector { return &Connector{} }

// Name implements connectors.Connector.
func (c *Connector) Name() string { return Name }

// Verify implements connectors.Connector. Checkout signs no timestamp, so
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

// Package checkout verifies and normalizes Checkout.com webhooks.
//
// Scheme (https://www.checkout.com/docs/developer-resources/webhooks/manage-webhooks/set-up-your-webhook-receiver):
// the Cko-Signature header is hex(HMAC-SHA256(signature key, raw body)),
// with the signature key configured on the webhook used as-is.
package checkout

import (
	"encoding/hex"
	"strings"
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
	keys := sig.Usable(secrets)
	if len(keys) == 0 {
		return authErr("no webhook secret configured")
	}
	raw := strings.TrimSpace(req.Header(SignatureHeader))
	if raw == "" {
		return authErr("missing " + SignatureHeader + " header")
	}
	got, err := hex.DecodeString(raw)
	if err != nil {
		return authErr(SignatureHeader + " header is not hex")
	}
	mac := func(key []byte) []byte { return sig.HMACSHA256(key, req.Body) }
	if !sig.Match(keys, [][]byte{got}, mac) {
		return authErr("signature matches no configured secret")
	}
	return nil
}

func authErr(reason string) error { return &connectors.AuthError{Connector: Name, Reason: reason} }

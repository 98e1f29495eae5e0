package checkout_test

import (
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/checkout"
	"github.com/videogen-dev/videogen-operator/internal/connectors/connectortest"
)

// FuzzHandleCheckout: any header and body yield an event, *AuthError or
// *ParseError; a body we signed ourselves never fails auth.
func FuzzHandleCheckout(f *testing.F) {
	f.Add(testSignature, capturedBody(f))
	f.Add("zz", disputeEvent("dispute_won"))
	f.Add("", paymentEvent("payment_refunded"))
	f.Add("00", []byte(`{"type":"payment_captured","data":null}`))
	conn := checkout.New()
	secrets := connectors.SecretsFromStrings(testKey)
	f.Fuzz(func(t *testing.T, signature string, body []byte) {
		connectortest.Input{Conn: conn, Secrets: secrets, Now: time.Now(),
			Sent: request(signature, body), Signed: request(sign(testKey, body), body)}.Check(t)
	})
}

package stripe_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/connectortest"
	"github.com/videogen-dev/videogen-operator/internal/connectors/stripe"
)

// FuzzHandleStripe feeds arbitrary headers and bodies through Handle and
// Parse. Whatever the input, the result must be an event, an *AuthError or
// a *ParseError, and a body we signed ourselves must never fail auth.
func FuzzHandleStripe(f *testing.F) {
	f.Add(dotnetHeader, dotnetBody(f))
	if full, err := os.ReadFile("testdata/payment_intent_succeeded.json"); err == nil {
		f.Add("t=1680064028,v1=00", full)
	}
	if dispute, err := os.ReadFile("testdata/charge_dispute_created.json"); err == nil {
		f.Add("t=1680651738,v1=00", dispute)
	}
	f.Add("t=1533204620,v1=zz,v1=", []byte(`{"type":"charge.refunded","data":{"object":{"object":"charge","refunds":{"data":[]}}}}`))
	f.Add("t=-1", envelope("charge.dispute.closed", fmt.Sprintf(disputeObject, "won")))
	f.Add(",,=,", envelope("payment_intent.succeeded", pi("succeeded", "null", "null")))
	f.Add("t=9223372036854775807,v1=00", []byte(`{"type":"refund.updated","data":{"object":{"payment_intent":{"id":7}}}}`))

	conn := stripe.New()
	secrets := connectors.SecretsFromStrings(dotnetSecret)
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		now := time.Unix(1700000000, 0)
		connectortest.Input{Conn: conn, Secrets: secrets, Now: signedAt, Sent: request(header, body),
			Signed: request(sign(dotnetSecret, now.Unix(), body), body), SignedAt: now}.Check(t)
	})
}

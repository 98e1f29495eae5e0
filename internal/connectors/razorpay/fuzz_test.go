package razorpay_test

import (
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/connectortest"
	"github.com/videogen-dev/videogen-operator/internal/connectors/razorpay"
)

// FuzzHandleRazorpay: any header and body yield an event, *AuthError or
// *ParseError; a body we signed ourselves never fails auth.
func FuzzHandleRazorpay(f *testing.F) {
	f.Add(pySignature, authorizedBody(f))
	f.Add("zz", disputeEvent("payment.dispute.lost"))
	f.Add("", refundEvent("refund.created", "processed"))
	f.Add("00", []byte(`{"event":"payment.failed","payload":{"payment":null}}`))
	conn := razorpay.New()
	secrets := connectors.SecretsFromStrings(pySecret)
	f.Fuzz(func(t *testing.T, signature string, body []byte) {
		connectortest.Input{Conn: conn, Secrets: secrets, Now: time.Now(),
			Sent: request(signature, body), Signed: request(sign(pySecret, body), body)}.Check(t)
	})
}

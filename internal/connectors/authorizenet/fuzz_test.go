package authorizenet_test

import (
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/authorizenet"
	"github.com/videogen-dev/videogen-operator/internal/connectors/connectortest"
)

// FuzzHandleAuthorizenet: any header and body yield an event, *AuthError or
// *ParseError; a body we signed ourselves never fails auth.
func FuzzHandleAuthorizenet(f *testing.F) {
	f.Add(forumSignature, []byte(forumBody))
	f.Add("sha512=", notification("net.authorize.payment.refund.created", 1, "-0.5"))
	f.Add("=", notification("net.authorize.payment.fraud.held", 4, "99999999999999999999"))
	f.Add("SHA512=zz", []byte(`{"eventType":"net.authorize.payment.void.created","payload":null}`))
	conn := authorizenet.New(authorizenet.WithCurrency("USD"))
	secrets := connectors.SecretsFromStrings(forumKey)
	f.Fuzz(func(t *testing.T, signature string, body []byte) {
		connectortest.Input{Conn: conn, Secrets: secrets, Now: time.Now(),
			Sent: request(signature, string(body)), Signed: request(sign(forumKey, body), string(body))}.Check(t)
	})
}

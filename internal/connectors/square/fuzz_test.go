package square_test

import (
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/connectortest"
	"github.com/videogen-dev/videogen-operator/internal/connectors/square"
)

// FuzzHandleSquare: any URI, header and body yield an event, *AuthError or
// *ParseError; a body we signed ourselves never fails auth.
func FuzzHandleSquare(f *testing.F) {
	f.Add(sdkURL, sdkSignature, []byte(sdkBody))
	f.Add(sdkURL2, sdkSigEscaped, []byte(sdkBodyEscaped))
	f.Add("http://[::1", "%%", []byte(disputeEvent("dispute.state.updated", "LOST")))
	f.Add("/relative", "", []byte(refundEvent("refund.updated", "COMPLETED")))
	secrets := connectors.SecretsFromStrings(sdkKey)
	f.Fuzz(func(t *testing.T, uri, signature string, body []byte) {
		sent := &connectors.Request{URI: uri, Headers: connectors.HeadersFromMap(map[string]string{"x-square-hmacsha256-signature": signature}), Body: body}
		signed := &connectors.Request{URI: uri, Headers: connectors.HeadersFromMap(map[string]string{"x-square-hmacsha256-signature": sign(sdkKey, sdkURL, body)}), Body: body}
		connectortest.Input{Conn: square.New(), Secrets: secrets, Now: time.Now(), Sent: sent,
			Signed: signed, SignedConn: square.New(square.WithNotificationURL(sdkURL))}.Check(t)
	})
}

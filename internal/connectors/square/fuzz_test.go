package square_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
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
		ctx := context.Background()
		req := &connectors.Request{URI: uri, Headers: connectors.HeadersFromMap(map[string]string{"x-square-hmacsha256-signature": signature}), Body: body}
		_, err := connectors.HandleWith(ctx, square.New(), req, secrets, "", time.Now())
		checkErr(t, err, true)
		_, err = square.New().Parse(req)
		checkErr(t, err, false)
		configured := square.New(square.WithNotificationURL(sdkURL))
		req.Headers.Set("x-square-hmacsha256-signature", sign(sdkKey, sdkURL, body))
		ev, err := connectors.HandleWith(ctx, configured, req, secrets, "", time.Now())
		checkErr(t, err, false)
		if err == nil && (ev.Type == "" || ev.MerchantEventID == "") {
			t.Fatalf("incomplete event %+v", ev)
		}
	})
}

func checkErr(t *testing.T, err error, authAllowed bool) {
	t.Helper()
	var authErr *connectors.AuthError
	var parseErr *connectors.ParseError
	switch {
	case err == nil, errors.As(err, &parseErr):
	case authAllowed && errors.As(err, &authErr):
	default:
		t.Fatalf("unexpected error %T: %v", err, err)
	}
}

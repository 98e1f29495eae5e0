package authorizenet_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/authorizenet"
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
		ctx := context.Background()
		_, err := connectors.HandleWith(ctx, conn, request(signature, string(body)), secrets, "", time.Now())
		checkErr(t, err, true)
		_, err = conn.Parse(&connectors.Request{Body: body})
		checkErr(t, err, false)
		ev, err := connectors.HandleWith(ctx, conn, request(sign(forumKey, body), string(body)), secrets, "", time.Now())
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

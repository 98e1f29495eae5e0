package stripe_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
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
	f.Add("t=1533204620,v1=zz,v1=", []byte(`{"type":"charge.refunded","data":{"object":{"object":"charge","refunds":{"data":[]}}}}`))
	f.Add("t=-1", envelope("charge.dispute.closed", fmt.Sprintf(disputeObject, "won")))
	f.Add(",,=,", envelope("payment_intent.succeeded", pi("succeeded", "null", "null")))
	f.Add("t=9223372036854775807,v1=00", []byte(`{"type":"refund.updated","data":{"object":{"payment_intent":{"id":7}}}}`))

	conn := stripe.New()
	secrets := connectors.SecretsFromStrings(dotnetSecret)
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		ctx := context.Background()
		_, err := connectors.HandleWith(ctx, conn, request(header, body), secrets, "", signedAt)
		checkErr(t, err, true)

		_, err = conn.Parse(&connectors.Request{Body: body})
		checkErr(t, err, false)

		now := time.Unix(1700000000, 0)
		ev, err := connectors.HandleWith(ctx, conn, request(sign(dotnetSecret, now.Unix(), body), body), secrets, "", now)
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

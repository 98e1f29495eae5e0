package razorpay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
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
		ctx := context.Background()
		_, err := connectors.HandleWith(ctx, conn, request(signature, body), secrets, "", time.Now())
		checkErr(t, err, true)
		_, err = conn.Parse(&connectors.Request{Body: body})
		checkErr(t, err, false)
		ev, err := connectors.HandleWith(ctx, conn, request(sign(pySecret, body), body), secrets, "", time.Now())
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

package all_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	_ "github.com/videogen-dev/videogen-operator/internal/connectors/all"
)

func TestNames(t *testing.T) {
	want := []string{"adyen", "authorizenet", "checkout", "razorpay", "square", "stripe"}
	if got := connectors.Names(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
}

func TestHandleUnknownConnector(t *testing.T) {
	_, err := connectors.Handle(context.Background(), "paypal", &connectors.Request{}, connectors.SecretsFromStrings("s"), "", time.Now())
	if !errors.Is(err, connectors.ErrUnknownConnector) {
		t.Fatalf("err = %v, want ErrUnknownConnector", err)
	}
}

// TestHandleByName runs the Razorpay published vector through the default
// registry: razorpay/razorpay-python tests/test_client_utility.py with
// tests/mocks/fake_payment_authorized_webhook.json and secret "key_secret".
func TestHandleByName(t *testing.T) {
	body, err := os.ReadFile("../razorpay/testdata/fake_payment_authorized_webhook.json")
	if err != nil {
		t.Fatal(err)
	}
	req := &connectors.Request{
		Method:  "POST",
		Headers: connectors.HeadersFromMap(map[string]string{"x-razorpay-signature": "d60e67fd884556c045e9be7dad57903e33efc7172c17c6e3ef77db42d2b366e9"}),
		Body:    body,
	}
	ev, err := connectors.Handle(context.Background(), "razorpay", req, connectors.SecretsFromStrings("key_secret"), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if ev.Connector != "razorpay" || ev.Type != connectors.PaymentIntentAuthorizationSuccess || !ev.Complete {
		t.Fatalf("event = %+v", ev)
	}
	_, err = connectors.Handle(context.Background(), "razorpay", req, connectors.SecretsFromStrings("wrong"), "", time.Now())
	var authErr *connectors.AuthError
	if !errors.As(err, &authErr) {
		t.Fatalf("err = %v, want *AuthError", err)
	}
}

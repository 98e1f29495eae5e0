package paymentevents_test

import (
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

// A connectors filter value that is not a connector name by its form (^[a-z0-9]{1,32}$) is
// refused (sinks_filter_backoff_test.go), so `connectors: [Stripe]` is, but a misspelling of
// the right form (`strpe`, `authorize`, `checkoutcom`, `paypal`) was accepted: the manager
// reloaded the file happily and the sink silently received nothing, for good (sinks are chosen
// when an event is recorded), the very loss sinks_filter_backoff_test.go closes for
// eventTypes. A value is now one of the connectors the ingress serves, and the error lists them.
func TestSinkConnectorFilterNamesAServedConnector(t *testing.T) {
	const head = "sinks:\n- name: billing\n  url: https://billing.example/hooks\n  secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n"
	for _, name := range []string{"strpe", "authorize", "checkoutcom", "paypal"} {
		_, err := paymentevents.ParseSinkConfig([]byte(head + "  connectors: [stripe, " + name + "]\n"))
		if err == nil {
			t.Errorf("connectors [stripe, %s] accepted: the sink never gets a %s event", name, name)
			continue
		}
		if want := `connectors: "` + name + `" is not a connector`; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "authorizenet") {
			t.Errorf("connectors [%s]: error %q does not say %q and list the connectors", name, err, want)
		}
	}
	if _, err := paymentevents.ParseSinkConfig([]byte(head + "  connectors: [adyen, authorizenet, checkout, razorpay, square, stripe]\n")); err != nil {
		t.Errorf("every connector refused: %v", err)
	}
}

// Package all registers every connector, with default options, in the
// connectors package's default registry. Import it for its side effect:
//
//	import _ "github.com/videogen-dev/videogen-operator/internal/connectors/all"
//
// Connectors that need configuration (Square's notification URL,
// Authorize.net's currency, Stripe's tolerance) should instead be built with
// their options and put in a connectors.Registry of your own, or passed to
// connectors.HandleWith.
package all

import (
	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/adyen"
	"github.com/videogen-dev/videogen-operator/internal/connectors/authorizenet"
	"github.com/videogen-dev/videogen-operator/internal/connectors/checkout"
	"github.com/videogen-dev/videogen-operator/internal/connectors/razorpay"
	"github.com/videogen-dev/videogen-operator/internal/connectors/square"
	"github.com/videogen-dev/videogen-operator/internal/connectors/stripe"
)

// Connectors returns a new instance of every connector with default options.
func Connectors() []connectors.Connector {
	return []connectors.Connector{
		adyen.New(),
		authorizenet.New(),
		checkout.New(),
		razorpay.New(),
		square.New(),
		stripe.New(),
	}
}

func init() {
	for _, c := range Connectors() {
		// Only a duplicate name can fail here: a programming error worth
		// stopping the process for at start-up, never at request time.
		if err := connectors.Register(c); err != nil {
			panic(err)
		}
	}
}

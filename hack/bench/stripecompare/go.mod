// A module of its own so that stripe-go stays out of the operator's go.mod: it is only the
// yardstick for the Stripe connector's speed.
module github.com/videogen-dev/videogen-operator/hack/bench/stripecompare

go 1.26.8

require (
	github.com/stripe/stripe-go/v85 v85.0.0
	github.com/videogen-dev/videogen-operator v0.0.0
)

replace github.com/videogen-dev/videogen-operator => ../../..

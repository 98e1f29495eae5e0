package eventservice_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"
)

// A Handle request whose headers map names one header twice, in two cases
// ("Stripe-Signature" with a good signature, "stripe-signature" with a bad one). Header names
// are case-insensitive, so both are the one header; the map is unordered, so which value the
// connector read depended on Go's map iteration order: the same request verified on one call and
// was refused Unauthenticated on the next (and an event could be accepted under a signature the
// caller did not mean). Now the request is refused as invalid, every time, naming the header.
// The ingress is not affected: net/http merges a header's lines in the order received.
func TestHeaderNamedTwiceInTwoCasesIsRefused(t *testing.T) {
	svc := newService(t)
	msg := stripeRequest(stripeSecret)
	good := msg.RequestDetails.Headers["stripe-signature"]
	delete(msg.RequestDetails.Headers, "stripe-signature")
	msg.RequestDetails.Headers["Stripe-Signature"] = good
	msg.RequestDetails.Headers["stripe-signature"] = strings.Replace(good, "v1=", "v1=00", 1)
	for range 20 {
		_, err := svc.Handle(context.Background(), connect.NewRequest(msg))
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument || !strings.Contains(ce.Message(), "Stripe-Signature") {
			t.Fatalf("a header named twice in two cases: %v, want invalid argument naming it", err)
		}
	}

	// The same value under two spellings is one header said twice: taken.
	msg.RequestDetails.Headers["stripe-signature"] = good
	if _, err := svc.Handle(context.Background(), connect.NewRequest(msg)); err != nil {
		t.Fatalf("one header given twice with one value: %v", err)
	}
}

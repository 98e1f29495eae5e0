package stripe_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/stripe"
)

// BenchmarkHandleStripe measures verify+parse of a full
// payment_intent.succeeded event (testdata/payment_intent_succeeded.json,
// shaped like the API reference's PaymentIntent) with a two-secret rotation,
// the matching secret second.
func BenchmarkHandleStripe(b *testing.B) {
	body, err := os.ReadFile("testdata/payment_intent_succeeded.json")
	if err != nil {
		b.Fatal(err)
	}
	now := time.Unix(1680064030, 0)
	req := request(sign("whsec_new", 1680064028, body), body)
	secrets := connectors.SecretsFromStrings("whsec_old", "whsec_new")
	conn := stripe.New()
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := connectors.HandleWith(ctx, conn, req, secrets, "", now); err != nil {
			b.Fatal(err)
		}
	}
}

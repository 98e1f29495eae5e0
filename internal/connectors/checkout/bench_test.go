package checkout_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/checkout"
)

// BenchmarkHandleCheckout measures verify+parse of Checkout's documented
// payment_captured example with a two-secret rotation.
func BenchmarkHandleCheckout(b *testing.B) {
	body := capturedBody(b)
	req := request(testSignature, body)
	secrets := connectors.SecretsFromStrings("cko-rotated-signature-key", testKey)
	conn := checkout.New()
	ctx := context.Background()
	now := time.Now()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := connectors.HandleWith(ctx, conn, req, secrets, "", now); err != nil {
			b.Fatal(err)
		}
	}
}

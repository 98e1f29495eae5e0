package razorpay_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/razorpay"
)

// BenchmarkHandleRazorpay measures verify+parse of razorpay-python's
// payment.authorized fixture with a two-secret rotation.
func BenchmarkHandleRazorpay(b *testing.B) {
	body := authorizedBody(b)
	req := request(pySignature, body)
	secrets := connectors.SecretsFromStrings("old_secret", pySecret)
	conn := razorpay.New()
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

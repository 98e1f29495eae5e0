package square_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/square"
)

// BenchmarkHandleSquare measures verify+parse of a payment.updated event
// with a configured notification URL and a two-secret rotation.
func BenchmarkHandleSquare(b *testing.B) {
	body := paymentEvent("payment.updated", "COMPLETED")
	const url = "https://example.com/webhooks/square"
	req := request("/webhooks/square", sign(sdkKey, url, []byte(body)), body)
	secrets := connectors.SecretsFromStrings("MCmhFRxGX82xMwg5FsaoQA", sdkKey)
	conn := square.New(square.WithNotificationURL(url))
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

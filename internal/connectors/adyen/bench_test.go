package adyen_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/adyen"
)

// BenchmarkHandleAdyen measures verify+parse of a one-item AUTHORISATION
// notification (Adyen's recommended batch size) with a two-key rotation.
func BenchmarkHandleAdyen(b *testing.B) {
	body := batch(signItem(testKey, "QFQTPCQ8HXSKGK82", "", "AUTHORISATION", "true", "1130", "EUR",
		`,"authCode":"058705","cardSummary":"1111","expiryDate":"03/2030","paymentMethodVariant":"visa","shopperIP":"192.0.2.1"`))
	req := request(body)
	secrets := connectors.SecretsFromStrings(phpAuthKey, testKey)
	conn := adyen.New()
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

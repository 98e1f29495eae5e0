package authorizenet_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/authorizenet"
)

// BenchmarkHandleAuthorizenet measures verify+parse of the forum's real
// authcapture delivery with a two-secret rotation.
func BenchmarkHandleAuthorizenet(b *testing.B) {
	req := request(forumSignature, forumBody)
	secrets := connectors.SecretsFromStrings("OLDKEY", forumKey)
	conn := authorizenet.New(authorizenet.WithCurrency("USD"))
	ctx := context.Background()
	now := time.Now()
	b.ReportAllocs()
	b.SetBytes(int64(len(forumBody)))
	for b.Loop() {
		if _, err := connectors.HandleWith(ctx, conn, req, secrets, "", now); err != nil {
			b.Fatal(err)
		}
	}
}

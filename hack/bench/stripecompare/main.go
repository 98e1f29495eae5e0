// Command stripecompare times the Stripe connector beside stripe-go's own
// webhook.ConstructEvent on the same signed payload (the connector's benchmark payload, its
// api_version set to the one stripe-go expects so that ConstructEvent accepts it unchanged).
//
//	cd hack/bench/stripecompare && go run .
package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v85"
	"github.com/stripe/stripe-go/v85/webhook"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/stripe"
)

const secret = "whsec_benchmark_secret"

func main() {
	raw, err := os.ReadFile("../../../internal/connectors/stripe/testdata/payment_intent_succeeded.json")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	body := regexp.MustCompile(`"api_version":\s*"[^"]*"`).ReplaceAll(raw, []byte(`"api_version": "`+stripego.APIVersion+`"`))
	now := time.Now()
	header := sign(secret, now.Unix(), body)
	req := &connectors.Request{Method: http.MethodPost, URI: "/v1/webhooks/stripe",
		Headers: http.Header{"Stripe-Signature": []string{header}}, Body: body}
	one := connectors.SecretsFromStrings(secret)
	two := connectors.SecretsFromStrings("whsec_old_secret", secret)
	conn := stripe.New()
	ctx := context.Background()

	// Both must accept the payload before they are timed.
	if _, err := connectors.HandleWith(ctx, conn, req, one, "", now); err != nil {
		fail("connector", err)
	}
	if _, err := webhook.ConstructEvent(body, header, secret); err != nil {
		fail("stripe-go", err)
	}

	rows := []struct {
		name string
		fn   func(b *testing.B)
	}{
		{"connectors.HandleWith(stripe), 1 secret: verify + parse + normalize", func(b *testing.B) {
			for b.Loop() {
				if _, err := connectors.HandleWith(ctx, conn, req, one, "", now); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"connectors.HandleWith(stripe), 2 secrets (rotation, match second)", func(b *testing.B) {
			for b.Loop() {
				if _, err := connectors.HandleWith(ctx, conn, req, two, "", now); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"stripe-go webhook.ConstructEvent: verify + unmarshal stripe.Event", func(b *testing.B) {
			for b.Loop() {
				if _, err := webhook.ConstructEvent(body, header, secret); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"stripe (*Connector).Verify only", func(b *testing.B) {
			for b.Loop() {
				if err := conn.Verify(req, one, now); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"stripe-go webhook.ValidatePayload (verify only)", func(b *testing.B) {
			for b.Loop() {
				if err := webhook.ValidatePayload(body, header, secret); err != nil {
					b.Fatal(err)
				}
			}
		}},
	}
	results := make([]testing.BenchmarkResult, len(rows))
	for i, r := range rows {
		fn := r.fn
		results[i] = testing.Benchmark(func(b *testing.B) { b.ReportAllocs(); b.SetBytes(int64(len(body))); fn(b) })
	}
	fmt.Println("### Stripe: the connector beside stripe-go " + stripego.APIVersion + " (github.com/stripe/stripe-go/v85 v85.0.0)")
	fmt.Println()
	fmt.Printf("Same signed payload (%d bytes, `connectors/stripe/testdata/payment_intent_succeeded.json`), `testing.Benchmark`, 1 s each.\n\n", len(body))
	fmt.Println("| what | ns/op | B/op | allocs/op | ÷ stripe-go (same scope) |")
	fmt.Println("|---|---:|---:|---:|---:|")
	for i, r := range rows {
		ref := results[2]
		if i >= 3 {
			ref = results[4]
		}
		fmt.Printf("| %s | %d | %d | %d | %.2f |\n", r.name, results[i].NsPerOp(), results[i].AllocedBytesPerOp(), results[i].AllocsPerOp(),
			float64(results[i].NsPerOp())/float64(ref.NsPerOp()))
	}
	ok := results[0].NsPerOp() <= results[2].NsPerOp()
	fmt.Printf("\nGoal: not slower than stripe-go (HandleWith, 1 secret, vs ConstructEvent): **%s**.\n", map[bool]string{true: "met", false: "not met"}[ok])
}

func fail(who string, err error) {
	fmt.Fprintf(os.Stderr, "%s refused the signed payload: %v\n", who, err)
	os.Exit(1)
}

// sign makes a Stripe-Signature header with the standard library only.
func sign(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(ts, 10) + "."))
	mac.Write(body)
	return "t=" + strconv.FormatInt(ts, 10) + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

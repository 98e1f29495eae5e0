package razorpay_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/razorpay"
)

// Published vector: razorpay/razorpay-python, tests/test_client_utility.py
// (test_verify_webhook_signature): secret is the test client's key secret
// "key_secret" (tests/helpers.py), body is
// tests/mocks/fake_payment_authorized_webhook.json, copied byte for byte to
// testdata/ (its trailing newline is part of the signed bytes). Re-checked:
//
//	openssl dgst -sha256 -hmac key_secret testdata/fake_payment_authorized_webhook.json
//	HMAC-SHA2-256(...)= d60e67fd884556c045e9be7dad57903e33efc7172c17c6e3ef77db42d2b366e9
const (
	pySecret    = "key_secret"
	pySignature = "d60e67fd884556c045e9be7dad57903e33efc7172c17c6e3ef77db42d2b366e9"
)

func authorizedBody(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/fake_payment_authorized_webhook.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func request(signature string, body []byte) *connectors.Request {
	h := http.Header{}
	if signature != "" {
		h.Set("X-Razorpay-Signature", signature)
	}
	return &connectors.Request{Method: http.MethodPost, URI: "/webhooks/razorpay", Headers: h, Body: body}
}

// sign uses the standard library only, independently of the connector.
func sign(key string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

func TestVerify(t *testing.T) {
	body := authorizedBody(t)
	tests := []struct {
		name     string
		req      *connectors.Request
		secrets  []string
		wantAuth string
	}{
		{name: "published vector", req: request(pySignature, body), secrets: []string{pySecret}},
		{name: "second secret of a rotation", req: request(pySignature, body), secrets: []string{"old_secret", pySecret}},
		{name: "lower-case header name", req: &connectors.Request{Headers: connectors.HeadersFromMap(map[string]string{"x-razorpay-signature": pySignature}), Body: body}, secrets: []string{pySecret}},
		{name: "non-canonical header map", req: &connectors.Request{Headers: http.Header{"x-razorpay-signature": {pySignature}}, Body: body}, secrets: []string{pySecret}},
		{name: "trailing newline stripped", req: request(pySignature, body[:len(body)-1]), secrets: []string{pySecret}, wantAuth: "matches no configured secret"},
		{name: "tampered amount", req: request(pySignature, []byte(strings.Replace(string(body), "1000000", "1000001", 1))), secrets: []string{pySecret}, wantAuth: "matches no configured secret"},
		{name: "wrong secret", req: request(pySignature, body), secrets: []string{"key_id"}, wantAuth: "matches no configured secret"},
		{name: "missing header", req: request("", body), secrets: []string{pySecret}, wantAuth: "missing X-Razorpay-Signature"},
		{name: "malformed header", req: request("test_signature", body), secrets: []string{pySecret}, wantAuth: "not hex"},
		{name: "no secret", req: request(pySignature, body), secrets: nil, wantAuth: "no webhook secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := razorpay.New().Verify(tt.req, connectors.SecretsFromStrings(tt.secrets...), time.Time{})
			if tt.wantAuth == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			var authErr *connectors.AuthError
			if !errors.As(err, &authErr) || authErr.Connector != "razorpay" || !strings.Contains(authErr.Reason, tt.wantAuth) {
				t.Fatalf("err = %v, want *AuthError containing %q", err, tt.wantAuth)
			}
		})
	}
}

func TestHandlePublishedVector(t *testing.T) {
	ctx := context.Background()
	body := authorizedBody(t)
	ev, err := connectors.HandleWith(ctx, razorpay.New(), request(pySignature, body), connectors.SecretsFromStrings(pySecret), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := connectors.PaymentDetails{PaymentID: "pay_6koWN7bvxujzxM", ConnectorTransactionID: "pay_6koWN7bvxujzxM",
		AmountMinor: 1000000, Currency: "INR", Status: "captured", CreatedAt: time.Unix(1479978483, 0).UTC()}
	// No X-Razorpay-Event-Id header: the id falls back to the body hash,
	// computed independently with `sha256sum testdata/fake_payment_authorized_webhook.json`.
	if ev.Type != connectors.PaymentIntentAuthorizationSuccess || !ev.Complete || *ev.Payment != want ||
		ev.MerchantEventID != "sha256:9cc0236491299f34a154292eaed46d94b010f44b22095c034f884ca6a1862bef" {
		t.Fatalf("event = %+v\npayment = %+v", ev, ev.Payment)
	}
	if !ev.OccurredAt.Equal(time.Unix(1400826760, 0)) {
		t.Fatalf("OccurredAt = %v", ev.OccurredAt)
	}

	// The X-Razorpay-Event-Id header is not signed: the id stays the body's,
	// so a replay with another header is the same event.
	req := request(pySignature, body)
	req.Headers.Set("X-Razorpay-Event-Id", "KjDcd7MfDLt3hd")
	again, err := connectors.HandleWith(ctx, razorpay.New(), req, connectors.SecretsFromStrings(pySecret), "", time.Now())
	if err != nil || again.MerchantEventID != ev.MerchantEventID {
		t.Fatalf("the unsigned event id header made another event: %v %+v", err, again)
	}
}

func TestHandleUnparseableBody(t *testing.T) {
	body := []byte("{\"event\":\"payment.captured\",\"payload\":{\"payment\":{\"entity\":{\"amount\":\"12\"}}}}\n")
	_, err := connectors.HandleWith(context.Background(), razorpay.New(), request(sign(pySecret, body), body),
		connectors.SecretsFromStrings(pySecret), "", time.Now())
	var parseErr *connectors.ParseError
	if !errors.As(err, &parseErr) {
		t.Fatalf("err = %v, want *ParseError", err)
	}
}

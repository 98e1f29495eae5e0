package checkout_test

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
	"github.com/videogen-dev/videogen-operator/internal/connectors/checkout"
)

// No published Checkout.com signature vector was found (their docs describe
// the scheme but give no key/body/signature triple, and the official SDKs
// ship no webhook verifier). The vector below was computed once with
// openssl over testdata/payment_captured.json — Checkout's documented
// payment_captured example
// (https://www.checkout.com/docs/workflows/webhook-event-types/payment_captured)
// compacted to one line — and pasted:
//
//	openssl dgst -sha256 -hmac 'cko-test-signature-key' testdata/payment_captured.json
//	HMAC-SHA2-256(testdata/payment_captured.json)= 9950a68680c996b92826dec4002ae397385d0cd3d5e42653fea5871bb6310921
const (
	testKey       = "cko-test-signature-key"
	testSignature = "9950a68680c996b92826dec4002ae397385d0cd3d5e42653fea5871bb6310921"
)

func capturedBody(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/payment_captured.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func request(signature string, body []byte) *connectors.Request {
	h := http.Header{}
	if signature != "" {
		h.Set("Cko-Signature", signature)
	}
	return &connectors.Request{Method: http.MethodPost, URI: "/webhooks/checkout", Headers: h, Body: body}
}

// sign uses the standard library only, independently of the connector.
func sign(key string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

func TestVerify(t *testing.T) {
	body := capturedBody(t)
	tampered := []byte(strings.Replace(string(body), `"amount":20,`, `"amount":2000,`, 1))
	tests := []struct {
		name     string
		req      *connectors.Request
		secrets  []string
		wantAuth string
	}{
		{name: "openssl vector", req: request(testSignature, body), secrets: []string{testKey}},
		{name: "upper-case hex", req: request(strings.ToUpper(testSignature), body), secrets: []string{testKey}},
		{name: "second secret of a rotation", req: request(testSignature, body), secrets: []string{"old-key", testKey}},
		{name: "lower-case header name", req: &connectors.Request{Headers: connectors.HeadersFromMap(map[string]string{"cko-signature": testSignature}), Body: body}, secrets: []string{testKey}},
		{name: "tampered body", req: request(testSignature, tampered), secrets: []string{testKey}, wantAuth: "matches no configured secret"},
		{name: "trailing newline added", req: request(testSignature, append(append([]byte(nil), body...), '\n')), secrets: []string{testKey}, wantAuth: "matches no configured secret"},
		{name: "wrong secret", req: request(testSignature, body), secrets: []string{"other"}, wantAuth: "matches no configured secret"},
		{name: "missing header", req: request("", body), secrets: []string{testKey}, wantAuth: "missing Cko-Signature"},
		{name: "malformed header", req: request("sha256="+testSignature, body), secrets: []string{testKey}, wantAuth: "not hex"},
		{name: "truncated signature", req: request(testSignature[:62], body), secrets: []string{testKey}, wantAuth: "matches no configured secret"},
		{name: "no secret", req: request(testSignature, body), wantAuth: "no webhook secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkout.New().Verify(tt.req, connectors.SecretsFromStrings(tt.secrets...), time.Time{})
			if tt.wantAuth == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			var authErr *connectors.AuthError
			if !errors.As(err, &authErr) || authErr.Connector != "checkout" || !strings.Contains(authErr.Reason, tt.wantAuth) {
				t.Fatalf("err = %v, want *AuthError containing %q", err, tt.wantAuth)
			}
		})
	}
}

func TestHandleVector(t *testing.T) {
	ev, err := connectors.HandleWith(context.Background(), checkout.New(), request(testSignature, capturedBody(t)),
		connectors.SecretsFromStrings(testKey), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := connectors.PaymentDetails{PaymentID: "pay_vti5layihapu5bhbn5tjtk6eem", ConnectorTransactionID: "act_uqlj3642dyyuroivzdwfg2fysq",
		MerchantReference: "ORD-5023-4E89", AmountMinor: 20, Currency: "EUR", Status: "10000", Reason: "Approved",
		CreatedAt: time.Date(2023, 5, 24, 9, 12, 27, 469551200, time.UTC)}
	if ev.Type != connectors.PaymentIntentCaptureSuccess || ev.MerchantEventID != "evt_fkfqht6yonme7bk7jawrgzbbxq" || !ev.Complete || *ev.Payment != want {
		t.Fatalf("event = %+v\npayment = %+v", ev, ev.Payment)
	}
	if !ev.OccurredAt.Equal(time.Date(2023, 5, 24, 9, 12, 32, 357000000, time.UTC)) {
		t.Fatalf("OccurredAt = %v", ev.OccurredAt)
	}
}

func TestHandleUnparseableBody(t *testing.T) {
	body := []byte(`{"id":"evt_x","type":"payment_captured","data":{"amount":"20"}}`)
	_, err := connectors.HandleWith(context.Background(), checkout.New(), request(sign(testKey, body), body),
		connectors.SecretsFromStrings(testKey), "", time.Now())
	var parseErr *connectors.ParseError
	if !errors.As(err, &parseErr) {
		t.Fatalf("err = %v, want *ParseError", err)
	}
}

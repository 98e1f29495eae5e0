package square_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/square"
)

// Published vectors: square/square-nodejs-sdk,
// test/utilities/webhooksHelper.test.ts ("test signature validation pass",
// "test signature unescaped chars validation pass", "test signature with
// escaped characters", and its negative cases). Re-checked, e.g.:
//
//	printf '%s' 'https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9{"merchant_id":...}' |
//	  openssl dgst -sha256 -hmac 'Ibxx_5AKakO-3qeNVR61Dw' -binary | base64
//	GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=
const (
	sdkBody      = `{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`
	sdkSignature = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4="
	sdkKey       = "Ibxx_5AKakO-3qeNVR61Dw"
	sdkURL       = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9"

	sdkURL2          = "https://webhook.site/webhooks"
	sdkKey2          = "signature-key"
	sdkBodyPlain     = `{"data":{"type":"webhooks","id":"fake_id"}}`
	sdkSigPlain      = "W3FlCNk5IA3ZQ2LHTWoajvzfaDu/OwY2tNHIHC3IUOA="
	sdkBodyEscaped   = `{"data":{"type":"webhooks","id":">id<"}}`
	sdkSigEscaped    = "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U="
	sdkBodyOtherDate = `{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-06-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`
)

func request(uri, signature, body string) *connectors.Request {
	h := http.Header{}
	if signature != "" {
		h.Set("x-square-hmacsha256-signature", signature)
	}
	return &connectors.Request{Method: http.MethodPost, URI: uri, Headers: h, Body: []byte(body)}
}

// sign uses the standard library only, independently of the connector.
func sign(key, notificationURL string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(notificationURL))
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func TestVerify(t *testing.T) {
	configured := square.New(square.WithNotificationURL(sdkURL))
	formatted := "{\n    \"merchant_id\": \"MLEFBHHSJGVHD\",\n    \"type\": \"webhooks.test_notification\",\n    \"event_id\": \"ac3ac95b-f97d-458c-a6e6-18981597e05f\",\n    \"created_at\": \"2022-07-13T20:30:59.037339943Z\",\n    \"data\": {\n      \"type\": \"webhooks\",\n      \"id\": \"bc368e64-01aa-407e-b46e-3231809b1129\"\n    }\n}"
	tests := []struct {
		name     string
		conn     *square.Connector
		req      *connectors.Request
		secrets  []string
		wantAuth string
	}{
		{name: "sdk vector, configured URL", conn: configured, req: request("/webhooks/square", sdkSignature, sdkBody), secrets: []string{sdkKey}},
		{name: "sdk vector, URL from absolute request URI", conn: square.New(), req: request(sdkURL, sdkSignature, sdkBody), secrets: []string{sdkKey}},
		{name: "sdk unescaped chars vector", conn: square.New(square.WithNotificationURL(sdkURL2)), req: request("", sdkSigPlain, sdkBodyPlain), secrets: []string{sdkKey2}},
		{name: "sdk escaped chars vector", conn: square.New(square.WithNotificationURL(sdkURL2)), req: request("", sdkSigEscaped, sdkBodyEscaped), secrets: []string{sdkKey2}},
		{name: "second secret of a rotation", conn: configured, req: request("", sdkSignature, sdkBody), secrets: []string{"MCmhFRxGX82xMwg5FsaoQA", sdkKey}},
		{name: "sdk: notification URL mismatch", conn: square.New(square.WithNotificationURL("https://webhook.site/79a4f3a-dcfa-49ee-bac5-9d0edad886b9")), req: request("", sdkSignature, sdkBody), secrets: []string{sdkKey}, wantAuth: "matches no configured secret"},
		{name: "sdk: invalid signature key", conn: configured, req: request("", sdkSignature, sdkBody), secrets: []string{"MCmhFRxGX82xMwg5FsaoQA"}, wantAuth: "matches no configured secret"},
		{name: "sdk: invalid signature header", conn: configured, req: request("", "1z2n3DEJJiUPKcPzQo1ftvbxGdw=", sdkBody), secrets: []string{sdkKey}, wantAuth: "matches no configured secret"},
		{name: "sdk: request body mismatch", conn: configured, req: request("", sdkSignature, sdkBodyOtherDate), secrets: []string{sdkKey}, wantAuth: "matches no configured secret"},
		{name: "sdk: request body formatted", conn: configured, req: request("", sdkSignature, formatted), secrets: []string{sdkKey}, wantAuth: "matches no configured secret"},
		{name: "missing header", conn: configured, req: request("", "", sdkBody), secrets: []string{sdkKey}, wantAuth: "missing X-Square-Hmacsha256-Signature"},
		{name: "malformed header", conn: configured, req: request("", "not*base64", sdkBody), secrets: []string{sdkKey}, wantAuth: "not base64"},
		{name: "relative URI, no configured URL", conn: square.New(), req: request("/webhooks/square", sdkSignature, sdkBody), secrets: []string{sdkKey}, wantAuth: "no notification URL"},
		{name: "sdk: empty signature key", conn: configured, req: request("", sdkSignature, sdkBody), secrets: []string{""}, wantAuth: "no webhook secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.conn.Verify(tt.req, connectors.SecretsFromStrings(tt.secrets...), time.Time{})
			if tt.wantAuth == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			var authErr *connectors.AuthError
			if !errors.As(err, &authErr) || authErr.Connector != "square" || !strings.Contains(authErr.Reason, tt.wantAuth) {
				t.Fatalf("err = %v, want *AuthError containing %q", err, tt.wantAuth)
			}
		})
	}
}

func TestHandlePublishedVector(t *testing.T) {
	ev, err := connectors.HandleWith(context.Background(), square.New(), request(sdkURL, sdkSignature, sdkBody),
		connectors.SecretsFromStrings(sdkKey), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != connectors.EventTypeUnsupported || ev.ConnectorEventType != "webhooks.test_notification" ||
		ev.MerchantEventID != "ac3ac95b-f97d-458c-a6e6-18981597e05f" || ev.Complete {
		t.Fatalf("event = %+v", ev)
	}
	if !ev.OccurredAt.Equal(time.Date(2022, 7, 13, 20, 30, 59, 37339943, time.UTC)) {
		t.Fatalf("OccurredAt = %v", ev.OccurredAt)
	}
}

func TestHandleUnparseableBody(t *testing.T) {
	body := `{"type":"payment.updated","event_id":"e1","data":{"object":{}}}`
	_, err := connectors.HandleWith(context.Background(), square.New(square.WithNotificationURL(sdkURL)),
		request("", sign(sdkKey, sdkURL, []byte(body)), body), connectors.SecretsFromStrings(sdkKey), "", time.Now())
	var parseErr *connectors.ParseError
	if !errors.As(err, &parseErr) {
		t.Fatalf("err = %v, want *ParseError", err)
	}
}

// A Request built from a plain map (gRPC metadata, a test harness) may carry the header under
// its lower-case wire name, a key http.Header.Get never looks up.
func TestVerifyLowerCaseHeaderKey(t *testing.T) {
	h := http.Header{}
	h["x-square-hmacsha256-signature"] = []string{sdkSignature}
	req := &connectors.Request{Method: http.MethodPost, URI: sdkURL, Headers: h, Body: []byte(sdkBody)}
	if got := h.Get(square.SignatureHeader); got != "" {
		t.Fatalf("Header.Get found %q: the key is canonical, so this case tests nothing", got)
	}

	if err := square.New().Verify(req, connectors.SecretsFromStrings(sdkKey), time.Time{}); err != nil {
		t.Fatalf("Verify: %v", err)
	}

	// The non-canonical key is still checked: a wrong signature under it is refused.
	h["x-square-hmacsha256-signature"] = []string{sign("not-the-key", sdkURL, []byte(sdkBody))}
	var authErr *connectors.AuthError
	if err := square.New().Verify(req, connectors.SecretsFromStrings(sdkKey), time.Time{}); !errors.As(err, &authErr) ||
		!strings.Contains(authErr.Reason, "matches no configured secret") {
		t.Fatalf("err = %v, want *AuthError for a wrong signature", err)
	}
}

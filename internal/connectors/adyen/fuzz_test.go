package adyen_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/adyen"
	"github.com/videogen-dev/videogen-operator/internal/connectors/connectortest"
)

// FuzzHandleAdyen feeds arbitrary bodies through Handle and Parse: the
// result must be an event, an *AuthError or a *ParseError, never a panic.
func FuzzHandleAdyen(f *testing.F) {
	f.Add(batch(phpAuthItem))
	f.Add(batch(phpRefundItem, goItem))
	f.Add(batch(signItem(testKey, "A", "B", "CHARGEBACK", "true", "1", "EUR", `,"disputeStatus":"Lost"`)))
	f.Add([]byte(`{"notificationItems":[{"NotificationRequestItem":{"success":true,"amount":{"value":"12"}}}]}`))

	conn := adyen.New()
	secrets := connectors.SecretsFromStrings(phpAuthKey, phpRefundKey, testKey)
	f.Fuzz(func(t *testing.T, body []byte) {
		// Adyen signs each item inside the body: FuzzSignedItemAdyen covers signed bodies.
		connectortest.Input{Conn: conn, Secrets: secrets, Now: time.Now(), Sent: request(body)}.Check(t)
	})
}

// FuzzSignedItemAdyen builds an item from arbitrary field values, signs it
// with the standard library, and checks the connector accepts it: the
// signing string must agree with Adyen's definition for any field content.
func FuzzSignedItemAdyen(f *testing.F) {
	f.Add("7914073381342284", "", "TestPayment-1407325143704", "AUTHORISATION", "true", int64(1130), "EUR")
	f.Add("a:b", "c\\:d", "\u00e9\"<>", "REFUND", "false", int64(-1), "")
	f.Fuzz(func(t *testing.T, psp, original, ref, code, success string, value int64, currency string) {
		for _, s := range []string{psp, original, ref, code, success, currency} {
			if !utf8.ValidString(s) { // JSON cannot carry invalid UTF-8 unchanged
				return
			}
		}
		v := strconv.FormatInt(value, 10)
		key, _ := hex.DecodeString(testKey)
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(strings.Join([]string{psp, original, "M", ref, v, currency, code, success}, ":")))
		it := map[string]any{
			"additionalData":      map[string]string{"hmacSignature": base64.StdEncoding.EncodeToString(mac.Sum(nil))},
			"amount":              map[string]any{"value": value, "currency": currency},
			"eventCode":           code,
			"merchantAccountCode": "M",
			"merchantReference":   ref,
			"originalReference":   original,
			"pspReference":        psp,
			"success":             success,
		}
		body, err := json.Marshal(map[string]any{"notificationItems": []any{map[string]any{"NotificationRequestItem": it}}})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := connectors.HandleWith(context.Background(), adyen.New(), request(body), connectors.SecretsFromStrings(testKey), "", time.Now())
		if err != nil {
			t.Fatalf("signed item rejected: %v\n%s", err, body)
		}
		if ev.MerchantEventID == "" || ev.ConnectorEventType != code {
			t.Fatalf("event = %+v", ev)
		}
	})
}

package adyen_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/adyen"
)

// Published vectors. Each is an item's fields, its HMAC key and the expected
// additionalData.hmacSignature:
//
//   - phpAuth, phpRefund: Adyen/adyen-php-api-library,
//     tests/Adyen/Util/HmacSignatureTest.php (testNotificationRequestItemHmac,
//     testHmacSignatureForRefundWithZeroValue).
//   - goItem: Adyen/adyen-go-api-library,
//     src/hmacvalidator/hmacvalidator_test.go (notificationRequestItem, expectedSign).
//
// Each re-checked with openssl, e.g.
//
//	printf '%s' '7914073381342284::TestMerchant:TestPayment-1407325143704:1130:EUR:AUTHORISATION:true' |
//	  openssl dgst -sha256 -mac HMAC -macopt hexkey:DFB1EB54...EAAB00 -binary | base64
//	Ny9gS2veKo5E4w8/OL6xz1/wvT/hYkAXy1xNc/QvO4I=
const (
	phpAuthKey   = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	phpRefundKey = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"

	phpAuthItem = `{"NotificationRequestItem":{"additionalData":{"hmacSignature":"Ny9gS2veKo5E4w8/OL6xz1/wvT/hYkAXy1xNc/QvO4I="},` +
		`"amount":{"currency":"EUR","value":1130},"eventCode":"AUTHORISATION","eventDate":"2014-08-06T13:39:03+02:00",` +
		`"merchantAccountCode":"TestMerchant","merchantReference":"TestPayment-1407325143704","operations":["CANCEL","CAPTURE","REFUND"],` +
		`"paymentMethod":"visa","pspReference":"7914073381342284","reason":"1234:7777:12/2012","success":"true"}}`

	phpRefundItem = `{"NotificationRequestItem":{"additionalData":{"hmacSignature":"J7HhsgZo5KwqdB7LFZJV6rfQgp+RqC2kuYyw/3x3w+8="},` +
		`"amount":{"currency":"EUR","value":0},"eventCode":"REFUND","merchantAccountCode":"TestMerchant",` +
		`"merchantReference":"TestPayment-1407325143704","pspReference":"7914073381342284","success":"true"}}`

	goItem = `{"NotificationRequestItem":{"additionalData":{"hmacSignature":"ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="},` +
		`"amount":{"currency":"EUR","value":1000},"eventCode":"EVENT","eventDate":"1970-01-01T00:00:00Z",` +
		`"merchantAccountCode":"merchantAccount","merchantReference":"reference","originalReference":"originalReference",` +
		`"paymentMethod":"VISA","pspReference":"pspReference","reason":"reason","success":"true"}}`
)

func batch(items ...string) []byte {
	return []byte(`{"live":"false","notificationItems":[` + strings.Join(items, ",") + `]}`)
}

func request(body []byte) *connectors.Request {
	return &connectors.Request{Method: "POST", URI: "/webhooks/adyen", Body: body}
}

// signItem builds an item and signs it with the standard library only,
// independently of the connector, for items without a published signature.
func signItem(hexKey, psp, original, eventCode, success, value, currency, extra string) string {
	key, _ := hex.DecodeString(hexKey)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(strings.Join([]string{psp, original, "TestMerchant", "order-42", value, currency, eventCode, success}, ":")))
	s := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	return `{"NotificationRequestItem":{"additionalData":{"hmacSignature":"` + s + `"` + extra + `},"amount":{"currency":"` + currency +
		`","value":` + value + `},"eventCode":"` + eventCode + `","eventDate":"2024-03-01T10:00:00+01:00","merchantAccountCode":"TestMerchant",` +
		`"merchantReference":"order-42","originalReference":"` + original + `","pspReference":"` + psp + `","reason":"","success":"` + success + `"}}`
}

func TestVerify(t *testing.T) {
	tests := []struct {
		name     string
		body     []byte
		secrets  []string
		wantAuth string
		wantPars bool
	}{
		{name: "php AUTHORISATION vector", body: batch(phpAuthItem), secrets: []string{phpAuthKey}},
		{name: "php REFUND zero value vector", body: batch(phpRefundItem), secrets: []string{phpRefundKey}},
		{name: "go library vector with originalReference", body: batch(goItem), secrets: []string{phpAuthKey}},
		{name: "lower-case hex key", body: batch(phpAuthItem), secrets: []string{strings.ToLower(phpAuthKey)}},
		{name: "second key of a rotation", body: batch(phpAuthItem), secrets: []string{phpRefundKey, phpAuthKey}},
		{name: "batch, each item with its own key", body: batch(phpAuthItem, phpRefundItem), secrets: []string{phpAuthKey, phpRefundKey}},
		{name: "batch with one bad item", body: batch(phpAuthItem, phpRefundItem), secrets: []string{phpAuthKey}, wantAuth: "item 1 (7914073381342284)"},
		{name: "tampered amount", body: batch(strings.Replace(phpAuthItem, `"value":1130`, `"value":1131`, 1)), secrets: []string{phpAuthKey}, wantAuth: "matches no configured key"},
		{name: "tampered success", body: batch(strings.Replace(phpAuthItem, `"success":"true"`, `"success":"false"`, 1)), secrets: []string{phpAuthKey}, wantAuth: "matches no configured key"},
		{name: "wrong key", body: batch(phpAuthItem), secrets: []string{phpRefundKey}, wantAuth: "matches no configured key"},
		{name: "key not hex", body: batch(phpAuthItem), secrets: []string{"not-hex"}, wantAuth: "no webhook secret"},
		{name: "no key", body: batch(phpAuthItem), wantAuth: "no webhook secret"},
		{name: "missing signature", body: batch(strings.Replace(phpAuthItem, `"hmacSignature":"Ny9gS2veKo5E4w8/OL6xz1/wvT/hYkAXy1xNc/QvO4I="`, `"x":"y"`, 1)), secrets: []string{phpAuthKey}, wantAuth: "missing additionalData.hmacSignature"},
		{name: "signature not base64", body: batch(strings.Replace(phpAuthItem, `Ny9gS2veKo5E4w8`, `Ny9g%2veKo5E4w8`, 1)), secrets: []string{phpAuthKey}, wantAuth: "not base64"},
		{name: "unparseable body", body: []byte(`{"notificationItems":[`), secrets: []string{phpAuthKey}, wantPars: true},
		{name: "no items", body: batch(), secrets: []string{phpAuthKey}, wantPars: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := adyen.New().Verify(request(tt.body), connectors.SecretsFromStrings(tt.secrets...), time.Time{})
			switch {
			case tt.wantPars:
				var parseErr *connectors.ParseError
				if !errors.As(err, &parseErr) {
					t.Fatalf("err = %v, want *ParseError", err)
				}
			case tt.wantAuth != "":
				var authErr *connectors.AuthError
				if !errors.As(err, &authErr) || authErr.Connector != "adyen" || !strings.Contains(authErr.Reason, tt.wantAuth) {
					t.Fatalf("err = %v, want *AuthError containing %q", err, tt.wantAuth)
				}
			case err != nil:
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

func TestHandlePublishedVector(t *testing.T) {
	ev, err := connectors.HandleWith(context.Background(), adyen.New(), request(batch(phpAuthItem)),
		connectors.SecretsFromStrings(phpAuthKey), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := connectors.PaymentDetails{PaymentID: "7914073381342284", ConnectorTransactionID: "7914073381342284",
		MerchantReference: "TestPayment-1407325143704", AmountMinor: 1130, Currency: "EUR", Status: "success", Reason: "1234:7777:12/2012"}
	if ev.Type != connectors.PaymentIntentAuthorizationSuccess || ev.MerchantEventID != "7914073381342284:AUTHORISATION" ||
		!ev.Complete || ev.Items != nil || *ev.Payment != want {
		t.Fatalf("event = %+v payment = %+v", ev, ev.Payment)
	}
	if !ev.OccurredAt.Equal(time.Date(2014, 8, 6, 11, 39, 3, 0, time.UTC)) {
		t.Fatalf("OccurredAt = %v", ev.OccurredAt)
	}
}

func TestHandleBatch(t *testing.T) {
	ev, err := connectors.HandleWith(context.Background(), adyen.New(), request(batch(phpAuthItem, phpRefundItem)),
		connectors.SecretsFromStrings(phpAuthKey, phpRefundKey), "caller-id", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Items) != 2 || ev.MerchantEventID != "caller-id" || ev.Type != connectors.PaymentIntentAuthorizationSuccess {
		t.Fatalf("event = %+v", ev)
	}
	refund := ev.Items[1]
	if refund.Type != connectors.ChargeRefunded || refund.MerchantEventID != "7914073381342284:REFUND" ||
		refund.Refund == nil || refund.Refund.AmountMinor != 0 || !refund.Complete || refund.Connector != "adyen" {
		t.Fatalf("item 1 = %+v", refund)
	}
	if ev.Items[0].MerchantEventID != "7914073381342284:AUTHORISATION" {
		t.Fatalf("item 0 id = %q", ev.Items[0].MerchantEventID)
	}
}

// Only the signed fields say which event an item is: an item without a pspReference resent
// with an unsigned field changed (eventDate, reason, additionalData) is the same event, alone
// or in a batch, and must not become a second PaymentEvent.
func TestAnItemWithoutPSPReferenceIsIdentifiedByItsSignedFields(t *testing.T) {
	const key = phpAuthKey
	item := signItem(key, "", "", "AUTHORISATION", "true", "500", "EUR", "")
	resent := strings.NewReplacer(`"eventDate":"2024-03-01T10:00:00+01:00"`, `"eventDate":"2024-03-02T11:00:00+01:00"`,
		`"reason":""`, `"reason":"changed in transit"`).Replace(signItem(key, "", "", "AUTHORISATION", "true", "500", "EUR", `,"extra":"x"`))
	if resent == item {
		t.Fatal("the resent item is not different")
	}
	other := signItem(key, "", "", "AUTHORISATION", "true", "501", "EUR", "")
	handle := func(body []byte) *connectors.Event {
		t.Helper()
		ev, err := connectors.HandleWith(context.Background(), adyen.New(), request(body), connectors.SecretsFromStrings(key), "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}

	first, again, different := handle(batch(item)), handle(batch(resent)), handle(batch(other))
	if first.MerchantEventID == "" || first.MerchantEventID != again.MerchantEventID {
		t.Fatalf("ids %q and %q: a change of unsigned fields made another event", first.MerchantEventID, again.MerchantEventID)
	}
	if different.MerchantEventID == first.MerchantEventID {
		t.Fatalf("a different signed amount has the same id %q", first.MerchantEventID)
	}

	inBatch, againInBatch := handle(batch(phpAuthItem, item)), handle(batch(phpAuthItem, resent))
	if inBatch.Items[1].MerchantEventID != againInBatch.Items[1].MerchantEventID || inBatch.Items[1].MerchantEventID != first.MerchantEventID {
		t.Fatalf("batch item ids %q and %q, alone %q", inBatch.Items[1].MerchantEventID, againInBatch.Items[1].MerchantEventID, first.MerchantEventID)
	}
}

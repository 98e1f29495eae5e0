package webhookingress_test

// Connectors seen through the ingress.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// A genuine Stripe event of a type the connector does not map, whose object has
// another shape than a PaymentIntent's (billing.credit_grant.created: "amount" is an object),
// is stored as EVENT_TYPE_UNSUPPORTED and answered 200.
//
// Input: an endpoint subscribed to all events (enabled_events ["*"]) receives
// billing.credit_grant.created, signed correctly. Before the fix the Stripe connector decoded
// every event's data.object as a payment object and answered 400 invalid_request "field
// data.object.amount is a JSON object, want an integer": Stripe retries a non-2xx for three
// days, marks the endpoint failing and may disable it, which stops the payment events too.
func TestStripeEventOfAnotherShapeIsStoredUnsupported(t *testing.T) {
	now := time.Unix(1767225600, 0)
	h, cl := fakeIngress(t, now, 0)
	body := []byte(`{"id":"evt_adv22_credit","object":"event","api_version":"2024-10-28.acacia","created":1767225590,` +
		`"type":"billing.credit_grant.created","data":{"object":{"id":"credgr_test_adv22","object":"billing.credit_grant",` +
		`"amount":{"monetary":{"currency":"usd","value":1000},"type":"monetary"},"category":"paid","created":1767225590,` +
		`"customer":"cus_adv22","livemode":false,"metadata":{},"name":"Purchased credits"}}}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(fakeStripeSecret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	req, err := http.NewRequest(http.MethodPost, "/v1/webhooks/stripe", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(mac.Sum(nil)))
	rec := newRecorder()
	h.ServeHTTP(rec, req)
	if rec.code != http.StatusOK || !strings.Contains(rec.body.String(), `"event_type":"EVENT_TYPE_UNSUPPORTED"`) {
		t.Fatalf("a genuine, verified Stripe event: %d %s, want 200 EVENT_TYPE_UNSUPPORTED", rec.code, rec.body.String())
	}
	var list videogenv1alpha1.PaymentEventList
	if err := cl.List(context.Background(), &list); err != nil || len(list.Items) != 1 ||
		list.Items[0].Spec.MerchantEventID != "evt_adv22_credit" || list.Items[0].Spec.EventType != "EVENT_TYPE_UNSUPPORTED" {
		t.Fatalf("stored: %v %+v", err, list.Items)
	}
}

const adyenHMACKey = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"

// signedAdyenNotification is one NotificationRequestItem signed as Adyen documents it (base64
// HMAC-SHA256, key hex-decoded, over pspReference:originalReference:merchantAccountCode:
// merchantReference:value:currency:eventCode:success), computed here with the standard library.
func signedAdyenNotification(t *testing.T, key, psp, eventCode, success string, value int) string {
	t.Helper()
	k, err := hex.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, k)
	mac.Write([]byte(psp + "::TestMerchant:ref-" + psp + ":" + strconv.Itoa(value) + ":EUR:" + eventCode + ":" + success))
	return `{"NotificationRequestItem":{"pspReference":"` + psp + `","merchantAccountCode":"TestMerchant","merchantReference":"ref-` + psp +
		`","amount":{"value":` + strconv.Itoa(value) + `,"currency":"EUR"},"eventCode":"` + eventCode + `","success":"` + success +
		`","eventDate":"2026-01-01T00:00:00+01:00","additionalData":{"hmacSignature":"` + base64.StdEncoding.EncodeToString(mac.Sum(nil)) + `"}}}`
}

// Checked, holds: an Adyen batch in which one item does not verify is refused whole (401, and
// nothing of it is stored, not even the items that do verify), so no item is lost or stored
// twice: Adyen retries the whole delivery, and the corrected batch stores every item once; a
// further redelivery of it (Adyen retries until it sees a 2xx) is all duplicates.
//
// Input: a batch [AUTHORISATION ok, REFUND signed with another key, CAPTURE ok]. Reachable: a
// key rotation in the Customer Area while deliveries are queued, or an item changed in transit.
func TestAdyenBatchWithOneBadItemStoresNothingThenEverythingOnce(t *testing.T) {
	now := time.Unix(1767225600, 0)
	cl := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	svc, err := eventservice.New(eventservice.StaticSecrets{"adyen": {adyenHMACKey}},
		eventservice.WithClock(clocktesting.NewFakePassiveClock(now)))
	if err != nil {
		t.Fatal(err)
	}
	post := adyenPoster(t, svc, cl)
	auth := signedAdyenNotification(t, adyenHMACKey, "ADV22AUTH0000001", "AUTHORISATION", "true", 1000)
	capture := signedAdyenNotification(t, adyenHMACKey, "ADV22CAPT0000001", "CAPTURE", "true", 1000)
	badRefund := signedAdyenNotification(t, strings.Repeat("0A", 32), "ADV22REFD0000001", "REFUND", "true", 400)
	goodRefund := signedAdyenNotification(t, adyenHMACKey, "ADV22REFD0000001", "REFUND", "true", 400)

	if code, out := post(auth, badRefund, capture); code != http.StatusUnauthorized || !strings.Contains(out, `"invalid_signature"`) {
		t.Fatalf("a batch with one bad item: %d %s, want 401 invalid_signature", code, out)
	}
	if n := storedEvents(cl); n != 0 {
		t.Fatalf("%d PaymentEvents stored from a refused batch", n)
	}
	if code, out := post(auth, goodRefund, capture); code != http.StatusOK || !strings.Contains(out, `"stored":3`) {
		t.Fatalf("the corrected batch: %d %s, want 200 with 3 stored", code, out)
	}
	if code, out := post(auth, goodRefund, capture); code != http.StatusOK || !strings.Contains(out, `"duplicate":true`) ||
		!strings.Contains(out, `"duplicates":3`) {
		t.Fatalf("its redelivery: %d %s, want 200 with 3 duplicates", code, out)
	}
	if n := storedEvents(cl); n != 3 {
		t.Fatalf("%d PaymentEvents stored, want 3", n)
	}
}

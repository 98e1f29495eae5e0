package webhookingress_test

// Adversarial review (round 22): connectors seen through the ingress. Run with:
// go test ./apiserver/webhookingress/ -run TestAdversarial22

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Round 22: a genuine Stripe event of a type the connector does not map, whose object has
// another shape than a PaymentIntent's (billing.credit_grant.created: "amount" is an object),
// is stored as EVENT_TYPE_UNSUPPORTED and answered 200.
//
// Input: an endpoint subscribed to all events (enabled_events ["*"]) receives
// billing.credit_grant.created, signed correctly. Before the fix the Stripe connector decoded
// every event's data.object as a payment object and answered 400 invalid_request "field
// data.object.amount is a JSON object, want an integer": Stripe retries a non-2xx for three
// days, marks the endpoint failing and may disable it, which stops the payment events too.
func TestAdversarial22StripeEventOfAnotherShapeIsStoredUnsupported(t *testing.T) {
	now := time.Unix(1767225600, 0)
	h, cl := adv21Ingress(t, now, 0)
	body := []byte(`{"id":"evt_adv22_credit","object":"event","api_version":"2024-10-28.acacia","created":1767225590,` +
		`"type":"billing.credit_grant.created","data":{"object":{"id":"credgr_test_adv22","object":"billing.credit_grant",` +
		`"amount":{"monetary":{"currency":"usd","value":1000},"type":"monetary"},"category":"paid","created":1767225590,` +
		`"customer":"cus_adv22","livemode":false,"metadata":{},"name":"Purchased credits"}}}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(adv21StripeSecret))
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

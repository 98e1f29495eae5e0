package paymentevents_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/checkout"
	"github.com/videogen-dev/videogen-operator/internal/connectors/stripe"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

// FAILED before the fix ("parsing time \"10000-01-01T00:00:00Z\" as \"2006-01-02T15:04:05Z07:00\":
// cannot parse ..."): a verified event whose time lies past 9999 in UTC became a PaymentEvent no
// one can store or read.
//
// Input: a correctly signed delivery whose event time is outside years 1..9999 once in UTC: a
// Stripe (or Razorpay) epoch such as `created: 253402300800`, or an RFC 3339 time such as
// Checkout's "9999-12-31T23:30:00-01:00" (a valid 4-digit-year RFC 3339 string that is
// 10000-01-01T00:30:00Z). The connectors turn it into a time.Time; FromEvent stores it as
// metav1.Time, which writes "10000-01-01T00:00:00Z".
//
// What happens in production: the kube-apiserver validates `format: date-time` of the CRD
// (kube-openapi strfmt.IsDateTime parses the date as "2006-01-02", so a 5-digit or negative
// year fails) and answers 422 Invalid; the ingress counts that as "not stored" and answers 503
// "retry later" every time, so the processor retries the event until it gives up and the
// event is never stored, although the README promises "a verified event is always storable".
// (Had it been stored, metav1.Time's decoder, which is what the controller's informer uses,
// could not read it back: this test checks exactly that round trip.)
//
// Fixed in internal/connectors/internal/norm: a time outside years 1..9999 is the zero time
// (left unset), as an unparseable one already is.
func TestVerifiedEventWithOutOfRangeTimeIsStorable(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const secret = "whsec_adv17"

	stripeBody := []byte(`{"id":"evt_adv17_y10k","object":"event","type":"payment_intent.succeeded","created":253402300800,` +
		`"data":{"object":{"id":"pi_adv17","object":"payment_intent","amount":2000,"amount_received":2000,"currency":"usd",` +
		`"status":"succeeded","created":-62135596801}}}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	stripeSig := "t=" + ts + ",v1=" + hmacHex(secret, []byte(ts+"."), stripeBody)

	checkoutBody := []byte(`{"id":"evt_adv17_cko","type":"payment_captured","created_on":"9999-12-31T23:30:00-01:00",` +
		`"data":{"id":"pay_adv17","action_id":"act_adv17","amount":2000,"currency":"EUR","processed_on":"0001-01-01T00:30:00+01:00"}}`)

	cases := []struct {
		name string
		c    connectors.Connector
		req  *connectors.Request
	}{
		{"stripe epoch past 9999 and before year 1", stripe.New(), &connectors.Request{Method: http.MethodPost,
			Headers: http.Header{stripe.SignatureHeader: {stripeSig}}, Body: stripeBody}},
		{"checkout RFC 3339 past 9999 and before year 1 in UTC", checkout.New(), &connectors.Request{Method: http.MethodPost,
			Headers: http.Header{checkout.SignatureHeader: {hmacHex(secret, checkoutBody)}}, Body: checkoutBody}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := connectors.HandleWith(context.Background(), tc.c, tc.req, [][]byte{[]byte(secret)}, "", now)
			if err != nil {
				t.Fatalf("not verified: %v", err)
			}
			for _, pe := range paymentevents.FromDelivery(ev, "payments", tc.req.Body, now) {
				// Year 0 reads back, but is no protobuf Timestamp: unknown, like past 9999.
				if pe.Spec.OccurredAt != nil || pe.Spec.Payment == nil || pe.Spec.Payment.CreatedAt != nil {
					t.Errorf("out-of-range times must be left unset: occurredAt %v, payment %+v", pe.Spec.OccurredAt, pe.Spec.Payment)
				}
				raw, err := json.Marshal(pe)
				if err != nil {
					t.Fatal(err)
				}
				var back videogenv1alpha1.PaymentEvent
				if err := json.Unmarshal(raw, &back); err != nil {
					t.Fatalf("the PaymentEvent of a verified event cannot be read back (the apiserver rejects it too): %v\n%s", err, raw)
				}
			}
		})
	}
}

func hmacHex(secret string, parts ...[]byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	for _, p := range parts {
		mac.Write(p)
	}
	return hex.EncodeToString(mac.Sum(nil))
}

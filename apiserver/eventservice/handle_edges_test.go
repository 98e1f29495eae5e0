package eventservice_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
	"github.com/videogen-dev/videogen-operator/internal/connectors"
)

// FAILED before the fix (500 "marshal message: proto: google.protobuf.Timestamp: seconds out of
// range 253402300800" for a verified webhook).
//
// Input: a Stripe event whose signed `created` is 253402300800 (10000-01-01T00:00:00Z; any
// epoch past 9999-12-31 or before year 1 does the same, as does an RFC 3339 time such as
// "9999-12-31T23:30:00-01:00" that is past 9999 in UTC, for the connectors that read those),
// signed with the secret the RPC caller sends in webhook_secrets, so the caller controls every
// byte. The connector verifies it and norm.Unix turns it into a time.Time of year 10000; the
// service builds the HandleResponse with timestamppb.New of it; Connect's JSON codec refuses to
// marshal a Timestamp outside 0001..9999 and the call ends in CodeInternal.
//
// Reachable: Handle is the service's one RPC, webhook_secrets is a documented request field,
// and the value is an ordinary int64 in the signed body. What the caller sees: HTTP 500
// "internal" for a request that is the caller's own input, not a server fault; a processor-
// signed body with such a time (a processor bug) fails the same way, every retry.
//
// Fixed: norm.Unix and norm.Time give the zero time (unknown, left unset) for a time outside
// years 1..9999, as they already do for one they cannot parse: "a bad timestamp should not
// reject a verified event".
func TestOutOfRangeTimestampIsNot500(t *testing.T) {
	srv := startH2CServer(t, newService(t))
	for _, created := range []string{"253402300800", "-62135596801", "9000000000000000000"} {
		t.Run(created, func(t *testing.T) {
			body := []byte(strings.Replace(stripeBody, `"created": 1767225590`, `"created": `+created, 1))
			reqJSON := `{"connector":"stripe","webhookSecrets":{"secret":"` + requestSecret + `"},` +
				`"requestDetails":{"method":"POST","uri":"/v1/webhooks/stripe",` +
				`"headers":{"Stripe-Signature":"` + signStripe(requestSecret, now, body) + `"},` +
				`"body":"` + base64.StdEncoding.EncodeToString(body) + `"}}`
			code, out := postJSON(t, srv.URL, serviceToken, reqJSON)
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, out)
			}
			var raw map[string]any
			if err := json.Unmarshal(out, &raw); err != nil {
				t.Fatal(err)
			}
			if raw["merchantEventId"] != "evt_rpc_test_1" || raw["occurredAt"] != nil {
				t.Fatalf("want the event with occurredAt left unset, got %s", out)
			}
		})
	}
}

// FAILS, NOT FIXED (the fix changes Razorpay's id scheme; see below).
//
// Input: one genuine Razorpay delivery (body + X-Razorpay-Signature), replayed by anyone who
// has seen it once (a request log, a debugging proxy, a shared capture) with the
// X-Razorpay-Event-Id header changed or removed. Razorpay signs the body only; the event id
// header is not covered by the signature, yet it is the merchant event id, the
// de-duplication key and (hashed) the PaymentEvent's name. Without it the id is the body hash.
//
// Impact: every replay with a fresh header verifies and gets a fresh merchant_event_id, so the
// ingress stores the same signed event again as a new PaymentEvent (a 200 "stored", not a
// duplicate) and every sink receives it again under a new merchant_event_id and webhook-id:
// billing that de-duplicates on either sees a second payment.captured. The README says replays
// of the schemes that sign no time "must be caught by de-duplicating on MerchantEventID"; for
// Razorpay the attacker chooses that id.
//
// Suggested fix: derive Razorpay's id from signed bytes only (e.g. the body hash, which is
// what Razorpay's own retries repeat byte for byte) and keep the header for display; existing
// PaymentEvents were named from the header, so a redelivery across the upgrade would be
// stored once more: a migration decision for the maintainers.
func TestRazorpayReplayWithAnotherEventIDHeaderIsTheSameEvent(t *testing.T) {
	const secret = "razorpay_webhook_secret"
	svc, err := eventservice.New(eventservice.StaticSecrets{"razorpay": {secret}})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"entity":"event","account_id":"acc_adv17","event":"payment.captured","contains":["payment"],` +
		`"payload":{"payment":{"entity":{"id":"pay_adv17","entity":"payment","amount":50000,"currency":"INR",` +
		`"status":"captured","created_at":1767225500}}},"created_at":1767225590}`)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	signature := hex.EncodeToString(mac.Sum(nil))

	ids := map[string]string{}
	for _, eventID := range []string{"Ev_adv17_genuine", "Ev_adv17_replay", ""} {
		h := http.Header{"X-Razorpay-Signature": {signature}}
		if eventID != "" {
			h.Set("X-Razorpay-Event-Id", eventID)
		}
		ev, err := svc.HandleWebhook(context.Background(), "razorpay",
			&connectors.Request{Method: http.MethodPost, URI: "/v1/webhooks/razorpay", Headers: h, Body: body}, "")
		if err != nil {
			t.Fatalf("header %q: %v", eventID, err)
		}
		ids[eventID] = ev.MerchantEventID
	}
	if ids["Ev_adv17_genuine"] != ids["Ev_adv17_replay"] || ids["Ev_adv17_genuine"] != ids[""] {
		t.Fatalf("one signed Razorpay body got merchant_event_ids %q: each replay with another unsigned "+
			"X-Razorpay-Event-Id is stored and forwarded as a new event", ids)
	}
}

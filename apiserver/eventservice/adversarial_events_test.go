package eventservice_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
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
func TestAdversarialOutOfRangeTimestampIsNot500(t *testing.T) {
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

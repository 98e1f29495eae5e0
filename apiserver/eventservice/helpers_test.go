package eventservice_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1"
)

const (
	serviceToken = "svc-token-for-tests"
	// stripeSecret is configured for "stripe" in the tests' SecretSource.
	stripeSecret = "whsec_configured"
	// requestSecret is only ever sent inside a request.
	requestSecret = "whsec_from_request"
)

// now is the service's clock in every test, and the time Stripe payloads are
// signed at.
var now = time.Unix(1767225600, 0) // 2026-01-01T00:00:00Z

// stripeBody is a payment_intent.succeeded event trimmed to the fields the
// connector reads.
const stripeBody = `{
  "id": "evt_rpc_test_1",
  "object": "event",
  "type": "payment_intent.succeeded",
  "created": 1767225590,
  "data": {
    "object": {
      "id": "pi_rpc_test_1",
      "object": "payment_intent",
      "amount": 2000,
      "amount_received": 2000,
      "currency": "usd",
      "status": "succeeded",
      "latest_charge": "ch_rpc_test_1",
      "created": 1767225500
    }
  }
}`

// signStripe builds a Stripe-Signature header with the standard library
// only, independently of the code under test.
func signStripe(secret string, at time.Time, body []byte) string {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// stripeRequest is a Handle request for stripeBody signed with secret.
func stripeRequest(secret string) *eventsv1.HandleRequest {
	body := []byte(stripeBody)
	return &eventsv1.HandleRequest{
		Connector: "stripe",
		RequestDetails: &eventsv1.RequestDetails{
			Method:  http.MethodPost,
			Uri:     "/v1/webhooks/stripe",
			Headers: map[string]string{"stripe-signature": signStripe(secret, now, body), "content-type": "application/json"},
			Body:    body,
		},
	}
}

func newService(t testing.TB, opts ...eventservice.Option) *eventservice.Service {
	t.Helper()
	src := eventservice.StaticSecrets{"stripe": {stripeSecret}}
	opts = append([]eventservice.Option{eventservice.WithClock(clocktesting.NewFakePassiveClock(now))}, opts...)
	svc, err := eventservice.New(src, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func newHandler(t testing.TB, svc *eventservice.Service) http.Handler {
	t.Helper()
	auth, err := eventservice.NewTokenAuth(serviceToken)
	if err != nil {
		t.Fatal(err)
	}
	path, h, err := eventservice.NewHandler(svc, auth)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(path, h)
	return mux
}

// startTLSServer serves the RPC over TLS with HTTP/2 (needed by gRPC) and
// HTTP/1.1 on a loopback port. Its Client() trusts it and speaks HTTP/2.
func startTLSServer(t testing.TB, svc *eventservice.Service) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(newHandler(t, svc))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// startH2CServer serves the RPC in cleartext, HTTP/1.1 and HTTP/2 with prior
// knowledge (h2c), as inside a cluster without TLS.
func startH2CServer(t testing.TB, svc *eventservice.Service) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(newHandler(t, svc))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// checkStripeResponse checks the normalized stripeBody event.
func checkStripeResponse(t *testing.T, resp *eventsv1.HandleResponse) {
	t.Helper()
	if got := resp.GetEventType(); got != eventsv1.EventType_PAYMENT_INTENT_SUCCESS {
		t.Errorf("event_type = %v, want PAYMENT_INTENT_SUCCESS", got)
	}
	if !resp.GetSourceVerified() {
		t.Error("source_verified = false")
	}
	if got := resp.GetEventStatus(); got != eventsv1.EventStatus_EVENT_STATUS_COMPLETE {
		t.Errorf("event_status = %v, want COMPLETE", got)
	}
	if got := resp.GetMerchantEventId(); got != "evt_rpc_test_1" {
		t.Errorf("merchant_event_id = %q, want the Stripe event id", got)
	}
	if got := resp.GetConnectorEventType(); got != "payment_intent.succeeded" {
		t.Errorf("connector_event_type = %q", got)
	}
	if got := resp.GetOccurredAt().AsTime(); !got.Equal(time.Unix(1767225590, 0)) {
		t.Errorf("occurred_at = %v", got)
	}
	p := resp.GetPayment()
	if p == nil {
		t.Fatalf("event_response = %T, want payment", resp.GetEventResponse())
	}
	if p.GetPaymentId() != "pi_rpc_test_1" || p.GetAmountMinor() != 2000 || p.GetCurrency() != "USD" {
		t.Errorf("payment = %v, want pi_rpc_test_1 2000 USD", p)
	}
	if len(resp.GetItems()) != 0 {
		t.Errorf("items = %v, want none for a single event", resp.GetItems())
	}
}

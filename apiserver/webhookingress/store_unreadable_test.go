package webhookingress_test

// Plain `go test` tests on a fake client (no envtest): each forces one apiserver answer with an
// interceptor, step by step. Run with: go test ./apiserver/webhookingress/ -run TestStoreDuplicateUnreadable

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
	"github.com/videogen-dev/videogen-operator/apiserver/webhookingress"
	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// signedAdyenItem is one Adyen AUTHORISATION item for psp, signed with adyenKey by crypto/hmac
// only, over pspReference:originalReference:merchantAccountCode:merchantReference:value:
// currency:eventCode:success.
func signedAdyenItem(t *testing.T, psp, success, reason string) []byte {
	t.Helper()
	key, err := hex.DecodeString(adyenKey)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(strings.Join([]string{psp, "", "VideogenShop", "order-17", "4200", "EUR", "AUTHORISATION", success}, ":")))
	return []byte(fmt.Sprintf(`{"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":{"hmacSignature":%q},`+
		`"amount":{"currency":"EUR","value":4200},"eventCode":"AUTHORISATION","eventDate":"2026-03-01T10:00:00+01:00",`+
		`"merchantAccountCode":"VideogenShop","merchantReference":"order-17","originalReference":"",`+
		`"pspReference":%q,"reason":%q,"success":%q}}]}`, base64.StdEncoding.EncodeToString(mac.Sum(nil)), psp, reason, success))
}

// postTo delivers body to the handler for connector and returns the status and body.
func postTo(t *testing.T, h http.Handler, connector string, body []byte) (int, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/webhooks/"+connector, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// FAILED before the fix (200 {"duplicate":true,"event_type":"PAYMENT_INTENT_AUTHORIZATION_SUCCESS"}
// while the only PaymentEvent of that name says the authorisation FAILED).
//
// Interleaving (one delivery, one replica):
//  1. A PaymentEvent adyen-<sha(psp:AUTHORISATION)> is stored with eventType
//     PAYMENT_INTENT_AUTHORIZATION_FAILURE: Adyen's refused AUTHORISATION, stored by a version
//     whose ids did not yet include the outcome (the README's documented 409 case; any two
//     verified events whose ids collide take the same path).
//  2. Adyen sends the same psp's AUTHORISATION with success=true. The ingress verifies it and
//     its Create answers AlreadyExists.
//  3. The Get that should compare the stored event with the delivery fails (apiserver
//     timeout, throttling, a connection reset: the same transient faults the ingress answers
//     503 for everywhere else; reachable whenever the apiserver is slow, and the Get runs on
//     what is left of StoreTimeout after the Create).
//  4. store() says "It exists, so it was stored" and answers 200 duplicate with the
//     delivery's own event type, without knowing whether the stored event is this one.
//
// What a user sees: Adyen marks the successful authorisation delivered and never sends it
// again; the only PaymentEvent (and every sink) says the payment FAILED; no conflict outcome,
// no log line about a different event. When the Get had worked, the same delivery is 409 and
// Adyen retries. Expected: 503 (not stored as far as the ingress can tell; the processor
// retries, and the retry gets the real answer: 409 here, 200 duplicate for a true redelivery).
//
// Fixed: store() returns the Get's error, so the delivery is 503 like any other store fault.
func TestStoreDuplicateUnreadableIsNotAcknowledged(t *testing.T) {
	const ns, psp = "payments", "8815000000001717"
	old := paymentevents.FromEvent(&connectors.Event{
		Connector: "adyen", Type: connectors.PaymentIntentAuthorizationFailure, ConnectorEventType: "AUTHORISATION",
		MerchantEventID: psp + ":AUTHORISATION",
		Payment: &connectors.PaymentDetails{PaymentID: psp, ConnectorTransactionID: psp, MerchantReference: "order-17",
			AmountMinor: 4200, Currency: "EUR", Status: "failed", Reason: "Refused"},
	}, ns, signedAdyenItem(t, psp, "false", "Refused"), time.Now())

	getFails := true
	cl := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(old).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if getFails {
					return errors.New("the server was unable to return a response in the time allotted")
				}
				return c.Get(ctx, key, obj, opts...)
			},
		}).Build()
	svc, err := eventservice.New(withAdyen)
	if err != nil {
		t.Fatal(err)
	}
	h, err := webhookingress.New(webhookingress.Options{Service: svc, Client: cl, Namespace: ns,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)

	authorised := signedAdyenItem(t, psp, "true", "")
	status, body := postTo(t, mux, "adyen", authorised)
	if status == http.StatusOK {
		var stored videogenv1alpha1.PaymentEvent
		getFails = false
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(old), &stored); err != nil {
			t.Fatal(err)
		}
		t.Fatalf("answered 200 %s for the successful authorisation, but the stored PaymentEvent %s says %s: the event is lost",
			body, stored.Name, stored.Spec.EventType)
	}
	if status != http.StatusServiceUnavailable {
		t.Fatalf("answered %d %s, want 503 (retry)", status, body)
	}

	// The processor's retry, once the apiserver answers, gets the true answer.
	getFails = false
	status, body = postTo(t, mux, "adyen", authorised)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &e)
	if status != http.StatusConflict || e.Error.Code != "conflict" {
		t.Fatalf("retry answered %d %s, want 409 conflict", status, body)
	}
}

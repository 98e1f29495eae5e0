package eventservice_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1/eventsv1connect"
	"github.com/videogen-dev/videogen-operator/internal/connectors"
)

func TestHandleWebhook(t *testing.T) {
	svc := newService(t)
	body := []byte(stripeBody)
	req := &connectors.Request{
		Method:  http.MethodPost,
		Headers: http.Header{"Stripe-Signature": {signStripe(stripeSecret, now, body)}},
		Body:    body,
	}
	ev, err := svc.HandleWebhook(context.Background(), "stripe", req, "caller-id-1")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != connectors.PaymentIntentSuccess || !ev.Complete || ev.MerchantEventID != "caller-id-1" {
		t.Fatalf("event = %+v", ev)
	}

	_, err = svc.HandleWebhook(context.Background(), "stripe", &connectors.Request{}, "")
	if got := eventservice.ErrorCode(err); got != connect.CodeInvalidArgument {
		t.Fatalf("empty request: %v (%v), want InvalidArgument", got, err)
	}
}

func TestSecretSourceFailureIsUnavailable(t *testing.T) {
	src := eventservice.SecretSourceFunc(func(string) ([][]byte, error) {
		return nil, errors.New("secret store not synced")
	})
	svc, err := eventservice.New(src, eventservice.WithClock(clocktesting.NewFakePassiveClock(now)))
	if err != nil {
		t.Fatal(err)
	}
	msg := stripeRequest(stripeSecret)
	req := &connectors.Request{Headers: connectors.HeadersFromMap(msg.RequestDetails.Headers), Body: msg.RequestDetails.Body}
	_, err = svc.HandleWebhook(context.Background(), "stripe", req, "")
	if got := eventservice.ErrorCode(err); got != connect.CodeUnavailable || !errors.Is(err, eventservice.ErrSecretsUnavailable) {
		t.Fatalf("got %v (%v), want Unavailable", got, err)
	}

	// A request that carries its own secret does not need the source.
	msg.WebhookSecrets = &eventsv1.WebhookSecrets{Secret: stripeSecret}
	if _, err := svc.Handle(context.Background(), connect.NewRequest(msg)); err != nil {
		t.Fatalf("with request secret: %v", err)
	}
}

// panicky is a connector breaking its promise not to panic.
type panicky struct{}

func (panicky) Name() string { return "panicky" }
func (panicky) Verify(*connectors.Request, [][]byte, time.Time) error {
	panic("connector bug")
}
func (panicky) Parse(*connectors.Request) (*connectors.Event, error) { return nil, nil }

func TestConnectorPanicIsInternal(t *testing.T) {
	reg, err := connectors.NewRegistry(panicky{})
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	srv := startTLSServer(t, newService(t, eventservice.WithRegistry(reg), eventservice.WithLogger(logger)))
	client := eventsv1connect.NewEventServiceClient(srv.Client(), srv.URL)
	msg := &eventsv1.HandleRequest{
		Connector:      "panicky",
		RequestDetails: &eventsv1.RequestDetails{Body: []byte("{}")},
		WebhookSecrets: &eventsv1.WebhookSecrets{Secret: "s"},
	}
	_, err = connectHandle(t, client, serviceToken, msg)
	if got := connect.CodeOf(err); got != connect.CodeInternal {
		t.Fatalf("code = %v (%v), want Internal", got, err)
	}
	// The server is still serving.
	if _, err := connectHandle(t, client, serviceToken, msg); connect.CodeOf(err) != connect.CodeInternal {
		t.Fatalf("second call: %v", err)
	}
	if !strings.Contains(logged.String(), "connector bug") {
		t.Errorf("panic not logged; log: %q", logged.String())
	}
}

func TestErrorCode(t *testing.T) {
	tests := []struct {
		err  error
		want connect.Code
	}{
		{&connectors.AuthError{Connector: "stripe", Reason: "x"}, connect.CodeUnauthenticated},
		{fmt.Errorf("wrapped: %w", &connectors.ParseError{Connector: "stripe"}), connect.CodeInvalidArgument},
		{fmt.Errorf("%w: %q", connectors.ErrUnknownConnector, "x"), connect.CodeNotFound},
		{eventservice.ErrInvalidRequest, connect.CodeInvalidArgument},
		{eventservice.ErrSecretsUnavailable, connect.CodeUnavailable},
		{context.Canceled, connect.CodeCanceled},
		{context.DeadlineExceeded, connect.CodeDeadlineExceeded},
		{errors.New("other"), connect.CodeInternal},
	}
	for _, tt := range tests {
		if got := eventservice.ErrorCode(tt.err); got != tt.want {
			t.Errorf("ErrorCode(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// Adyen batches: each item is signed with the hex-decoded key over its eight
// fields (connectors/README.md), here with the standard library only.
const adyenKey = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"

func adyenItem(t *testing.T, psp, orig, ref, value, currency, code string) string {
	t.Helper()
	key, err := hex.DecodeString(adyenKey)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(psp + ":" + orig + ":TestMerchant:" + ref + ":" + value + ":" + currency + ":" + code + ":true"))
	sig := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	return fmt.Sprintf(`{"NotificationRequestItem":{"additionalData":{"hmacSignature":%q},`+
		`"amount":{"currency":%q,"value":%s},"eventCode":%q,"merchantAccountCode":"TestMerchant",`+
		`"merchantReference":%q,"originalReference":%q,"pspReference":%q,"success":"true"}}`,
		sig, currency, value, code, ref, orig, psp)
}

func TestAdyenBatchItems(t *testing.T) {
	srv := startTLSServer(t, newService(t))
	client := eventsv1connect.NewEventServiceClient(srv.Client(), srv.URL)
	body := `{"live":"false","notificationItems":[` +
		adyenItem(t, "PSP1", "", "order-1", "1130", "EUR", "AUTHORISATION") + "," +
		adyenItem(t, "PSP2", "PSP0", "order-0", "500", "EUR", "REFUND") + `]}`
	msg := &eventsv1.HandleRequest{
		Connector:      "adyen",
		RequestDetails: &eventsv1.RequestDetails{Method: http.MethodPost, Body: []byte(body)},
		WebhookSecrets: &eventsv1.WebhookSecrets{Secret: adyenKey},
	}
	resp, err := connectHandle(t, client, serviceToken, msg)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetEventType() != eventsv1.EventType_PAYMENT_INTENT_AUTHORIZATION_SUCCESS || resp.GetPayment().GetPaymentId() != "PSP1" {
		t.Errorf("top level = %v, want item 0", resp)
	}
	items := resp.GetItems()
	if len(items) != 2 {
		t.Fatalf("items = %d, want 2", len(items))
	}
	if items[0].GetMerchantEventId() != "PSP1:AUTHORISATION" || items[0].GetPayment().GetAmountMinor() != 1130 {
		t.Errorf("items[0] = %v", items[0])
	}
	r := items[1].GetRefund()
	if items[1].GetEventType() != eventsv1.EventType_CHARGE_REFUNDED || r.GetRefundId() != "PSP2" || r.GetPaymentId() != "PSP0" ||
		r.GetAmountMinor() != 500 || items[1].GetEventStatus() != eventsv1.EventStatus_EVENT_STATUS_COMPLETE {
		t.Errorf("items[1] = %v", items[1])
	}
}

package eventservice_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// A Handle error quoted the caller's values back whole. An unknown
// connector named with 5,000 bytes came back as a 5,000-byte message; an Adyen item whose
// pspReference was 100 KB and whose signature did not match, a 100 KB message; a header named
// twice with a 50 KB name, 150 KB. The apiserver's errors quote a value cut to 64 bytes with its
// length said and are at most 1 KiB (docs/api.md, Errors); so are the RPC's now.
func TestHandleErrorsDoNotQuoteValuesBackWhole(t *testing.T) {
	svc := newService(t)
	long := strings.Repeat("x", 5000)

	unknown := stripeRequest(stripeSecret)
	unknown.Connector = long
	adyenItem := map[string]any{"pspReference": strings.Repeat("P", 100_000), "merchantAccountCode": "M",
		"amount": map[string]any{"value": 100, "currency": "EUR"}, "eventCode": "AUTHORISATION", "success": "true",
		"additionalData": map[string]any{"hmacSignature": "AAAA"}}
	adyenBody, err := json.Marshal(map[string]any{"notificationItems": []any{map[string]any{"NotificationRequestItem": adyenItem}}})
	if err != nil {
		t.Fatal(err)
	}
	adyen := &eventsv1.HandleRequest{Connector: "adyen", RequestDetails: &eventsv1.RequestDetails{Method: "POST", Body: adyenBody},
		WebhookSecrets: &eventsv1.WebhookSecrets{Secret: adyenKey}}
	twice := stripeRequest(stripeSecret)
	name := "X-" + strings.Repeat("a", 50_000)
	twice.RequestDetails.Headers[name] = "1"
	twice.RequestDetails.Headers[strings.ToUpper(name)] = "2"

	for _, tc := range []struct {
		name string
		req  *eventsv1.HandleRequest
		code connect.Code
	}{
		{"unknown connector", unknown, connect.CodeNotFound},
		{"adyen item with a long pspReference", adyen, connect.CodeUnauthenticated},
		{"header named twice", twice, connect.CodeInvalidArgument},
	} {
		_, err := svc.Handle(context.Background(), connect.NewRequest(tc.req))
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != tc.code {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.code)
		}
		if n := len(ce.Message()); n > httpjson.MaxMessageBytes {
			t.Errorf("%s: the message is %d bytes, want at most %d: %.120s…", tc.name, n, httpjson.MaxMessageBytes, ce.Message())
		}
	}

	// The unknown name is quoted as the apiserver quotes a value: cut, with its length said.
	_, err = svc.Handle(context.Background(), connect.NewRequest(unknown))
	if want := httpjson.Echo(long); !strings.Contains(err.Error(), want) {
		t.Errorf("unknown connector: %.200s, want it to quote %s", err, want)
	}
}

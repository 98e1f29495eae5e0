package eventservice_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1/eventsv1connect"
)

func connectHandle(t testing.TB, client eventsv1connect.EventServiceClient, token string, msg *eventsv1.HandleRequest) (*eventsv1.HandleResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := connect.NewRequest(msg)
	if token != "" {
		req.Header().Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Handle(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// TestOnePortAllProtocols calls one server with the Connect protocol (proto
// and JSON codecs) and gRPC-Web; grpc_test.go covers gRPC on the same setup.
func TestOnePortAllProtocols(t *testing.T) {
	srv := startTLSServer(t, newService(t))
	clients := map[string]eventsv1connect.EventServiceClient{
		"connect+proto": eventsv1connect.NewEventServiceClient(srv.Client(), srv.URL),
		"connect+json":  eventsv1connect.NewEventServiceClient(srv.Client(), srv.URL, connect.WithProtoJSON()),
		"grpc-web":      eventsv1connect.NewEventServiceClient(srv.Client(), srv.URL, connect.WithGRPCWeb()),
		"grpc":          eventsv1connect.NewEventServiceClient(srv.Client(), srv.URL, connect.WithGRPC()),
	}
	for name, client := range clients {
		t.Run(name, func(t *testing.T) {
			resp, err := connectHandle(t, client, serviceToken, stripeRequest(stripeSecret))
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			checkStripeResponse(t, resp)
		})
	}
}

// postJSON sends a Connect unary call as plain HTTP/1.1 JSON, as curl would.
func postJSON(t *testing.T, url, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+eventsv1connect.EventServiceHandleProcedure, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func TestConnectJSONOverPlainHTTP(t *testing.T) {
	srv := startH2CServer(t, newService(t))
	body := []byte(stripeBody)
	// Hand-written JSON, as a non-Go caller would send it: field names in
	// lowerCamelCase, bytes in base64.
	reqJSON := `{
	  "connector": "stripe",
	  "requestDetails": {
	    "method": "POST",
	    "uri": "/v1/webhooks/stripe",
	    "headers": {"Stripe-Signature": "` + signStripe(stripeSecret, now, body) + `"},
	    "body": "` + base64.StdEncoding.EncodeToString(body) + `"
	  }
	}`

	code, out := postJSON(t, srv.URL, serviceToken, reqJSON)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, out)
	}
	// The JSON form itself: enum names as the connectors name them, int64 as
	// a string, the oneof member as a plain field.
	var raw map[string]any
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["eventType"] != "PAYMENT_INTENT_SUCCESS" || raw["sourceVerified"] != true || raw["eventStatus"] != "EVENT_STATUS_COMPLETE" {
		t.Errorf("response JSON = %s", out)
	}
	if p, _ := raw["payment"].(map[string]any); p == nil || p["amountMinor"] != "2000" {
		t.Errorf("payment JSON = %v", raw["payment"])
	}
	resp := new(eventsv1.HandleResponse)
	if err := protojson.Unmarshal(out, resp); err != nil {
		t.Fatal(err)
	}
	checkStripeResponse(t, resp)
}

func TestConnectJSONErrors(t *testing.T) {
	srv := startH2CServer(t, newService(t))
	valid, err := protojson.Marshal(stripeRequest(stripeSecret))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		token      string
		body       string
		wantStatus int
		wantCode   string
	}{
		{"no service token", "", string(valid), http.StatusUnauthorized, "unauthenticated"},
		{"bad signature", serviceToken, string(mustJSON(t, stripeRequest("whsec_wrong"))), http.StatusUnauthorized, "unauthenticated"},
		{"missing request_details", serviceToken, `{"connector":"stripe"}`, http.StatusBadRequest, "invalid_argument"},
		{"unknown connector", serviceToken, `{"connector":"paypal","requestDetails":{"body":"e30="}}`, http.StatusNotFound, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out := postJSON(t, srv.URL, tt.token, tt.body)
			var e struct{ Code, Message string }
			if err := json.Unmarshal(out, &e); err != nil {
				t.Fatalf("status %d, body %q: %v", status, out, err)
			}
			if status != tt.wantStatus || e.Code != tt.wantCode {
				t.Fatalf("got %d %q (%s), want %d %q", status, e.Code, e.Message, tt.wantStatus, tt.wantCode)
			}
		})
	}
}

func TestNonRPCRequestWithoutToken(t *testing.T) {
	srv := startH2CServer(t, newService(t))
	resp, err := http.Post(srv.URL+eventsv1connect.EventServiceHandleProcedure, "text/plain", bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	// Not an RPC, so the answer is the apiserver's error envelope, not plain text.
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error.Code != "invalid_service_token" || e.Error.Message == "" {
		t.Fatalf("body %+v (%v), want the error envelope", e, err)
	}
}

func mustJSON(t *testing.T, msg *eventsv1.HandleRequest) []byte {
	t.Helper()
	b, err := protojson.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

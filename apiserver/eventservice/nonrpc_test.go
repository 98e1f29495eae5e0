package eventservice_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1/eventsv1connect"
)

const unknownProcedure = "/videogen.events.v1.EventService/Nope"

// envelope is the apiserver's error body.
type envelope struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	} `json:"error"`
}

// send makes one plain HTTP request (as curl would) and decodes the error envelope.
func send(t *testing.T, method, url, contentType, token string, header http.Header) (*http.Response, envelope) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e envelope
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("%s %s: status %d, %s, body is no JSON: %v", method, url, resp.StatusCode, resp.Header.Get("Content-Type"), err)
	}
	return resp, e
}

// TestNonRPCRequestsGetTheEnvelope: requests connect-go answered itself with a bare status (a
// text/plain 404, an empty 405 or 415) get the apiserver's error envelope.
func TestNonRPCRequestsGetTheEnvelope(t *testing.T) {
	srv := startH2CServer(t, newService(t))
	handle := srv.URL + eventsv1connect.EventServiceHandleProcedure
	tests := []struct {
		name, method, url, contentType string
		wantStatus                     int
		wantCode                       string
		wantText                       []string
		wantHeader                     string // a header that must be set
	}{
		{"unknown procedure", http.MethodPost, srv.URL + unknownProcedure, "application/json",
			http.StatusNotFound, "not_found", []string{`no such procedure: "` + unknownProcedure + `"`, eventsv1connect.EventServiceHandleProcedure}, ""},
		{"unknown procedure, GET", http.MethodGet, srv.URL + unknownProcedure, "",
			http.StatusNotFound, "not_found", []string{"no such procedure"}, ""},
		{"GET on Handle", http.MethodGet, handle, "",
			http.StatusMethodNotAllowed, "method_not_allowed", []string{`"GET" is not allowed`, "allowed: POST"}, "Allow"},
		{"PUT on Handle", http.MethodPut, handle, "application/json",
			http.StatusMethodNotAllowed, "method_not_allowed", []string{`"PUT" is not allowed`}, "Allow"},
		{"text/plain", http.MethodPost, handle, "text/plain",
			http.StatusUnsupportedMediaType, "unsupported_media_type", []string{`Content-Type "text/plain"`, "application/json", "application/grpc"}, "Accept-Post"},
		{"no Content-Type", http.MethodPost, handle, "",
			http.StatusUnsupportedMediaType, "unsupported_media_type", []string{"no Content-Type"}, "Accept-Post"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, e := send(t, tt.method, tt.url, tt.contentType, serviceToken, nil)
			if resp.StatusCode != tt.wantStatus || e.Error.Code != tt.wantCode {
				t.Fatalf("got %d %q (%q), want %d %q", resp.StatusCode, e.Error.Code, e.Error.Message, tt.wantStatus, tt.wantCode)
			}
			for _, want := range tt.wantText {
				if !strings.Contains(e.Error.Message, want) {
					t.Errorf("message %q does not say %q", e.Error.Message, want)
				}
			}
			id := resp.Header.Get("X-Request-Id")
			if !strings.HasPrefix(id, "req_") || e.Error.RequestID != id {
				t.Errorf("X-Request-Id %q, request_id %q: want the same req_ id", id, e.Error.RequestID)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if tt.wantHeader != "" && resp.Header.Get(tt.wantHeader) == "" {
				t.Errorf("no %s header", tt.wantHeader)
			}
			if tt.wantHeader == "Allow" && resp.Header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow %q, want POST", resp.Header.Get("Allow"))
			}
		})
	}

	t.Run("a well-formed incoming request id is kept", func(t *testing.T) {
		resp, e := send(t, http.MethodGet, handle, "", serviceToken, http.Header{"X-Request-Id": {"req_from_caller_1"}})
		if resp.Header.Get("X-Request-Id") != "req_from_caller_1" || e.Error.RequestID != "req_from_caller_1" {
			t.Fatalf("X-Request-Id %q, request_id %q", resp.Header.Get("X-Request-Id"), e.Error.RequestID)
		}
	})
}

// TestNonRPCRequestsAuthenticateFirst: the token is checked before anything else, so an
// unauthenticated caller learns nothing about the procedures (401, not 404 or 405).
func TestNonRPCRequestsAuthenticateFirst(t *testing.T) {
	srv := startH2CServer(t, newService(t))
	for name, req := range map[string]struct{ method, path, contentType string }{
		"unknown procedure": {http.MethodPost, unknownProcedure, "text/plain"},
		"GET on Handle":     {http.MethodGet, eventsv1connect.EventServiceHandleProcedure, ""},
		"GET, unknown":      {http.MethodGet, unknownProcedure, ""},
	} {
		t.Run(name, func(t *testing.T) {
			resp, e := send(t, req.method, srv.URL+req.path, req.contentType, "", nil)
			if resp.StatusCode != http.StatusUnauthorized || e.Error.Code != "invalid_service_token" {
				t.Fatalf("got %d %q (%q), want 401 invalid_service_token", resp.StatusCode, e.Error.Code, e.Error.Message)
			}
			if resp.Header.Get("WWW-Authenticate") == "" || !strings.HasPrefix(e.Error.RequestID, "req_") {
				t.Errorf("WWW-Authenticate %q, request_id %q", resp.Header.Get("WWW-Authenticate"), e.Error.RequestID)
			}
		})
	}
}

// TestUnknownProcedureOverRPC: a client that speaks an RPC protocol gets Unimplemented in that
// protocol, with a message naming the procedure, not a bare HTTP 404.
func TestUnknownProcedureOverRPC(t *testing.T) {
	srv := startTLSServer(t, newService(t))
	for name, opts := range map[string][]connect.ClientOption{
		"connect": nil, "grpc": {connect.WithGRPC()}, "grpc-web": {connect.WithGRPCWeb()},
	} {
		t.Run(name, func(t *testing.T) {
			client := connect.NewClient[eventsv1.HandleRequest, eventsv1.HandleResponse](srv.Client(), srv.URL+unknownProcedure, opts...)
			req := connect.NewRequest(stripeRequest(stripeSecret))
			req.Header().Set("Authorization", "Bearer "+serviceToken)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := client.CallUnary(ctx, req)
			if connect.CodeOf(err) != connect.CodeUnimplemented || !strings.Contains(err.Error(), "no such procedure") {
				t.Fatalf("err = %v, want Unimplemented naming the procedure", err)
			}
		})
	}
}

// TestNoTokenIsAnsweredInTheFormatOfTheOtherChecks: the token check comes first, and answers
// in the format the later checks would: the envelope's 401 invalid_service_token for whatever
// they answer with the envelope (a Content-Type not served on the procedure, such as a form
// POST, or an unknown procedure called by no RPC client), and the protocol's Unauthenticated for
// an RPC. Each request is sent with the token too, to see the later checks' format.
func TestNoTokenIsAnsweredInTheFormatOfTheOtherChecks(t *testing.T) {
	srv := startH2CServer(t, newService(t))
	handle := srv.URL + eventsv1connect.EventServiceHandleProcedure
	connectV1 := http.Header{"Connect-Protocol-Version": {"1"}}
	tests := []struct {
		name, url, contentType string
		header                 http.Header
		wantEnvelope           bool
		withToken              int // the status with a valid token
	}{
		{"text/plain", handle, "text/plain", nil, true, http.StatusUnsupportedMediaType},
		{"form POST (curl -d)", handle, "application/x-www-form-urlencoded", nil, true, http.StatusUnsupportedMediaType},
		{"Connect streaming type on a unary procedure", handle, "application/connect+json", nil, true, http.StatusUnsupportedMediaType},
		{"gRPC with a codec not served", handle, "application/grpc+xml", nil, true, http.StatusUnsupportedMediaType},
		{"JSON to an unknown procedure (curl)", srv.URL + unknownProcedure, "application/json", nil, true, http.StatusNotFound},
		{"Connect JSON", handle, "application/json", nil, false, http.StatusOK},
		{"Connect JSON, charset in capitals", handle, "Application/JSON; Charset=UTF-8", nil, false, http.StatusOK},
		{"Connect client to an unknown procedure", srv.URL + unknownProcedure, "application/json", connectV1, false, http.StatusNotImplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			post := func(token string) (int, map[string]any) {
				t.Helper()
				body, err := protojson.Marshal(stripeRequest(stripeSecret))
				if err != nil {
					t.Fatal(err)
				}
				req, err := http.NewRequest(http.MethodPost, tt.url, bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range tt.header {
					req.Header[k] = v
				}
				req.Header.Set("Content-Type", tt.contentType)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var out map[string]any
				if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
					t.Fatalf("status %d, %s, body is no JSON: %v", resp.StatusCode, resp.Header.Get("Content-Type"), err)
				}
				return resp.StatusCode, out
			}
			status, out := post(serviceToken)
			if _, envelope := out["error"]; status != tt.withToken || envelope != tt.wantEnvelope {
				t.Fatalf("with the token: %d %v, want %d, envelope %v", status, out, tt.withToken, tt.wantEnvelope)
			}
			for _, token := range []string{"", "not-the-service-token"} {
				status, out := post(token)
				if status != http.StatusUnauthorized {
					t.Fatalf("token %q: %d %v, want 401", token, status, out)
				}
				if tt.wantEnvelope {
					e, _ := out["error"].(map[string]any)
					if e["code"] != "invalid_service_token" || !strings.HasPrefix(fmt.Sprint(e["request_id"]), "req_") {
						t.Errorf("token %q: %v, want the envelope with invalid_service_token and a request_id", token, out)
					}
				} else if out["code"] != "unauthenticated" {
					t.Errorf("token %q: %v, want Connect's unauthenticated", token, out)
				}
			}
		})
	}

	t.Run("RPC clients", func(t *testing.T) {
		for name, opts := range map[string][]connect.ClientOption{
			"connect": nil, "connect+json": {connect.WithProtoJSON()}, "grpc": {connect.WithGRPC()}, "grpc-web": {connect.WithGRPCWeb()},
		} {
			client := eventsv1connect.NewEventServiceClient(srv.Client(), srv.URL, opts...)
			_, err := client.Handle(context.Background(), connect.NewRequest(stripeRequest(stripeSecret)))
			if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "missing bearer service token") {
				t.Errorf("%s without a token: %v, want Unauthenticated in its protocol", name, err)
			}
		}
	})
}

package eventservice_test

import (
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1/eventsv1connect"
)

// TestHandleOutcomes runs each case through a real server with the Connect
// protocol; the mapping is protocol-independent (see grpc_test.go).
func TestHandleOutcomes(t *testing.T) {
	srv := startTLSServer(t, newService(t))
	client := eventsv1connect.NewEventServiceClient(srv.Client(), srv.URL)

	with := func(secret string, edit func(*eventsv1.HandleRequest)) *eventsv1.HandleRequest {
		r := stripeRequest(secret)
		edit(r)
		return r
	}
	tests := []struct {
		name     string
		token    string
		req      *eventsv1.HandleRequest
		wantCode connect.Code // 0: success
		wantText []string     // substrings of the error message
	}{
		{name: "configured secret", req: stripeRequest(stripeSecret)},
		{name: "request secret replaces configured", req: with(requestSecret, func(r *eventsv1.HandleRequest) {
			r.WebhookSecrets = &eventsv1.WebhookSecrets{Secret: requestSecret}
		})},
		{name: "rotation: additional_secret signs", req: with(requestSecret, func(r *eventsv1.HandleRequest) {
			r.WebhookSecrets = &eventsv1.WebhookSecrets{Secret: "whsec_new_not_used_yet", AdditionalSecret: requestSecret}
		})},
		{name: "empty webhook_secrets falls back to configured", req: with(stripeSecret, func(r *eventsv1.HandleRequest) {
			r.WebhookSecrets = &eventsv1.WebhookSecrets{}
		})},
		// Trimmed as the connector Secrets' values are: a secret read from a file with its
		// newline verified nothing (401 at every call) before.
		{name: "request secret with a trailing newline", req: with(requestSecret, func(r *eventsv1.HandleRequest) {
			r.WebhookSecrets = &eventsv1.WebhookSecrets{Secret: " " + requestSecret + "\n"}
		})},
		{name: "whitespace-only webhook_secrets falls back to configured", req: with(stripeSecret, func(r *eventsv1.HandleRequest) {
			r.WebhookSecrets = &eventsv1.WebhookSecrets{Secret: "\n", AdditionalSecret: " "}
		})},
		{name: "connector name case and spaces", req: with(stripeSecret, func(r *eventsv1.HandleRequest) {
			r.Connector = " Stripe "
		})},
		{name: "request secret does not fall back", req: with(stripeSecret, func(r *eventsv1.HandleRequest) {
			r.WebhookSecrets = &eventsv1.WebhookSecrets{Secret: requestSecret}
		}), wantCode: connect.CodeUnauthenticated, wantText: []string{"stripe", "no v1 signature matches"}},
		{name: "bad signature", req: stripeRequest("whsec_wrong"),
			wantCode: connect.CodeUnauthenticated, wantText: []string{"stripe", "not authenticated"}},
		{name: "missing signature header", req: with(stripeSecret, func(r *eventsv1.HandleRequest) {
			r.RequestDetails.Headers = nil
		}), wantCode: connect.CodeUnauthenticated, wantText: []string{"stripe", "missing Stripe-Signature"}},
		{name: "no secret anywhere", req: with(stripeSecret, func(r *eventsv1.HandleRequest) {
			r.Connector = "checkout"
		}), wantCode: connect.CodeUnauthenticated, wantText: []string{"checkout", "no webhook secret configured"}},
		{name: "unparseable body", req: unparseableStripe(), wantCode: connect.CodeInvalidArgument, wantText: []string{"stripe", "cannot parse"}},
		{name: "unknown connector", req: with(stripeSecret, func(r *eventsv1.HandleRequest) {
			r.Connector = "paypal"
		}), wantCode: connect.CodeNotFound, wantText: []string{"paypal", "unknown connector"}},
		{name: "missing connector", req: with(stripeSecret, func(r *eventsv1.HandleRequest) {
			r.Connector = ""
		}), wantCode: connect.CodeInvalidArgument, wantText: []string{"connector is required"}},
		{name: "missing request_details", req: &eventsv1.HandleRequest{Connector: "stripe"},
			wantCode: connect.CodeInvalidArgument, wantText: []string{"request_details"}},
		{name: "empty body", req: with(stripeSecret, func(r *eventsv1.HandleRequest) {
			r.RequestDetails.Body = nil
		}), wantCode: connect.CodeInvalidArgument, wantText: []string{"body is empty"}},
		{name: "no service token", token: "-", req: stripeRequest(stripeSecret),
			wantCode: connect.CodeUnauthenticated, wantText: []string{"missing bearer service token"}},
		{name: "invalid service token", token: serviceToken + "x", req: stripeRequest(stripeSecret),
			wantCode: connect.CodeUnauthenticated, wantText: []string{"invalid bearer service token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token := tt.token
			switch token {
			case "":
				token = serviceToken
			case "-":
				token = ""
			}
			resp, err := connectHandle(t, client, token, tt.req)
			if tt.wantCode == 0 {
				if err != nil {
					t.Fatalf("Handle: %v", err)
				}
				checkStripeResponse(t, resp)
				return
			}
			var cerr *connect.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("error = %v, want a *connect.Error", err)
			}
			if cerr.Code() != tt.wantCode {
				t.Errorf("code = %v (%s), want %v", cerr.Code(), cerr.Message(), tt.wantCode)
			}
			for _, s := range tt.wantText {
				if !strings.Contains(cerr.Message(), s) {
					t.Errorf("message %q does not contain %q", cerr.Message(), s)
				}
			}
			if strings.Contains(cerr.Message(), stripeSecret) || strings.Contains(cerr.Message(), requestSecret) {
				t.Errorf("message %q leaks a secret", cerr.Message())
			}
			// The caller is told what was wrong, not which Go package said so.
			for _, pkg := range []string{"eventservice:", "connectors:"} {
				if strings.Contains(cerr.Message(), pkg) {
					t.Errorf("message %q names the package %s", cerr.Message(), pkg)
				}
			}
		})
	}
}

// unparseableStripe is a correctly signed body that is not JSON: it passes
// verification and fails parsing.
func unparseableStripe() *eventsv1.HandleRequest {
	r := stripeRequest(stripeSecret)
	r.RequestDetails.Body = []byte("not json")
	r.RequestDetails.Headers["stripe-signature"] = signStripe(stripeSecret, now, r.RequestDetails.Body)
	return r
}

func TestNewHandlerRejectsMissingParts(t *testing.T) {
	auth, err := eventservice.NewTokenAuth(serviceToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := eventservice.NewHandler(nil, auth); err == nil {
		t.Error("NewHandler(nil Service) succeeded")
	}
	if _, _, err := eventservice.NewHandler(newService(t), nil); err == nil {
		t.Error("NewHandler(nil TokenAuth) succeeded")
	}
}

package eventservice_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1/eventsv1connect"
)

// goInternals are what a caller must not read in an error: Go types and package names.
var goInternals = []string{"eventsv1", "*", "unmarshal into", "proto: ", "proto:\u00a0"}

// TestMalformedBodyInCallersTerms: a body that does not decode is InvalidArgument in the
// caller's protocol, with a message about the body, not about connect-go's Go types.
func TestMalformedBodyInCallersTerms(t *testing.T) {
	check := func(t *testing.T, msg, want string) {
		t.Helper()
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
		for _, bad := range goInternals {
			if strings.Contains(msg, bad) {
				t.Errorf("message %q names %q", msg, bad)
			}
		}
	}

	t.Run("Connect JSON", func(t *testing.T) {
		srv := startH2CServer(t, newService(t))
		for body, detail := range map[string]string{
			"{":                 `request body is not valid JSON for HandleRequest: unexpected EOF`,
			`{"connector":5}`:   `request body is not valid JSON for HandleRequest: (line 1:14): invalid value for string field connector: 5`,
			`[1]`:               `request body is not valid JSON for HandleRequest: syntax error (line 1:1): unexpected token [`,
			`{"connector":""}x`: `request body is not valid JSON for HandleRequest: syntax error`,
		} {
			status, out := postJSON(t, srv.URL, serviceToken, body)
			var e struct{ Code, Message string } // Connect's own error shape, unchanged
			if err := json.Unmarshal(out, &e); err != nil || status != http.StatusBadRequest || e.Code != "invalid_argument" {
				t.Fatalf("body %q: status %d, %s (%v), want a Connect invalid_argument", body, status, out, err)
			}
			check(t, e.Message, detail)
		}
	})

	// Binary protobuf: a bytes value in the string field connector is invalid UTF-8.
	srv := startTLSServer(t, newService(t))
	for name, opts := range map[string][]connect.ClientOption{
		"Connect binary": nil, "gRPC": {connect.WithGRPC()}, "gRPC-Web": {connect.WithGRPCWeb()},
	} {
		t.Run(name, func(t *testing.T) {
			client := connect.NewClient[wrapperspb.BytesValue, eventsv1.HandleResponse](srv.Client(), srv.URL+eventsv1connect.EventServiceHandleProcedure, opts...)
			req := connect.NewRequest(wrapperspb.Bytes([]byte{0xff}))
			req.Header().Set("Authorization", "Bearer "+serviceToken)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := client.CallUnary(ctx, req)
			var cerr *connect.Error
			if !errors.As(err, &cerr) || cerr.Code() != connect.CodeInvalidArgument {
				t.Fatalf("err = %v, want InvalidArgument", err)
			}
			check(t, cerr.Message(), "request body is not a valid binary protobuf HandleRequest: ")
		})
	}

	t.Run("empty JSON body", func(t *testing.T) {
		srv := startH2CServer(t, newService(t))
		status, out := postJSON(t, srv.URL, serviceToken, "")
		if status != http.StatusBadRequest || !bytes.Contains(out, []byte("request body is empty")) {
			t.Fatalf("status %d, %s", status, out)
		}
	})
}

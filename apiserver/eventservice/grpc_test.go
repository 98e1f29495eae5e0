package eventservice_test

import (
	"context"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1/eventsv1connect"
)

// grpcHandle calls Handle with grpc-go. No grpc-go stubs are generated: the
// call goes by method name, which is all the gRPC wire protocol needs.
func grpcHandle(t *testing.T, conn *grpc.ClientConn, token string, req *eventsv1.HandleRequest) (*eventsv1.HandleResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	resp := new(eventsv1.HandleResponse)
	err := conn.Invoke(ctx, eventsv1connect.EventServiceHandleProcedure, req, resp)
	return resp, err
}

func dialTLS(t *testing.T, addr string, cert *x509.Certificate) *grpc.ClientConn {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewClientTLSFromCert(pool, "")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestGRPCOverTLS(t *testing.T) {
	srv := startTLSServer(t, newService(t))
	conn := dialTLS(t, srv.Listener.Addr().String(), srv.Certificate())

	resp, err := grpcHandle(t, conn, serviceToken, stripeRequest(stripeSecret))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	checkStripeResponse(t, resp)
}

func TestGRPCOverH2C(t *testing.T) {
	srv := startH2CServer(t, newService(t))
	conn, err := grpc.NewClient(srv.Listener.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })

	resp, err := grpcHandle(t, conn, serviceToken, stripeRequest(stripeSecret))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	checkStripeResponse(t, resp)
}

func TestGRPCErrorCodes(t *testing.T) {
	srv := startTLSServer(t, newService(t))
	conn := dialTLS(t, srv.Listener.Addr().String(), srv.Certificate())

	unknown := stripeRequest(stripeSecret)
	unknown.Connector = "paypal"
	tests := []struct {
		name     string
		token    string
		req      *eventsv1.HandleRequest
		want     codes.Code
		wantText string
	}{
		{"bad signature", serviceToken, stripeRequest("whsec_wrong"), codes.Unauthenticated, "stripe"},
		{"unknown connector", serviceToken, unknown, codes.NotFound, "paypal"},
		{"no service token", "", stripeRequest(stripeSecret), codes.Unauthenticated, "missing bearer"},
		{"wrong service token", "not-the-token", stripeRequest(stripeSecret), codes.Unauthenticated, "invalid bearer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := grpcHandle(t, conn, tt.token, tt.req)
			st := status.Convert(err)
			if st.Code() != tt.want || !strings.Contains(st.Message(), tt.wantText) {
				t.Fatalf("error = %v %q, want %v containing %q", st.Code(), st.Message(), tt.want, tt.wantText)
			}
		})
	}
}

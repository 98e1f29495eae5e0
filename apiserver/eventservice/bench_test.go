package eventservice_test

import (
	"testing"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1/eventsv1connect"
)

// BenchmarkHandleRPC measures one Handle call (Stripe, configured secret)
// over a loopback HTTP/2 TLS server with the Connect protocol: decode, token
// check, verify, parse, encode.
func BenchmarkHandleRPC(b *testing.B) {
	srv := startTLSServer(b, newService(b))
	client := eventsv1connect.NewEventServiceClient(srv.Client(), srv.URL)
	msg := stripeRequest(stripeSecret)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := connectHandle(b, client, serviceToken, msg); err != nil {
			b.Fatal(err)
		}
	}
}

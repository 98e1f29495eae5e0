package paymentevents_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/videogen-dev/videogen-operator/internal/outbound"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

func TestDeliverClassifiesAnswers(t *testing.T) {
	secret := standardwebhooks.NewSecret()
	body := []byte(`{"type":"payment_event.charge_refunded"}`)
	for _, tc := range []struct {
		status int
		want   outbound.Outcome
	}{
		{200, outbound.Delivered}, {204, outbound.Delivered},
		{410, outbound.Gone},
		{429, outbound.Retry}, {500, outbound.Retry}, {503, outbound.Retry},
		{400, outbound.Retry}, {302, outbound.Retry},
	} {
		var verifyErr error
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, _ := io.ReadAll(r.Body)
			verifyErr = standardwebhooks.Verify(secret, r.Header, got, time.Now(), 0)
			if tc.status == 302 {
				w.Header().Set("Location", "/elsewhere")
			}
			w.WriteHeader(tc.status)
		}))
		sink := paymentevents.Sink{Name: "s", URL: srv.URL, Secret: secret}
		a := paymentevents.Deliver(context.Background(), paymentevents.NewHTTPClient(), sink, "msg_1", body, time.Now())
		srv.Close()
		if a.Outcome != tc.want || a.Status != tc.status {
			t.Errorf("answer %d: outcome %v status %d, want %v", tc.status, a.Outcome, a.Status, tc.want)
		}
		if verifyErr != nil {
			t.Errorf("answer %d: the receiver could not verify the signature: %v", tc.status, verifyErr)
		}
	}
}

func TestDeliverRetriesATimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	sink := paymentevents.Sink{Name: "slow", URL: srv.URL, Secret: standardwebhooks.NewSecret(),
		Timeout: metav1.Duration{Duration: 100 * time.Millisecond}}
	a := paymentevents.Deliver(context.Background(), paymentevents.NewHTTPClient(), sink, "msg_1", []byte("{}"), time.Now())
	if a.Outcome != outbound.Retry || a.Status != 0 || a.Err == nil {
		t.Fatalf("attempt = %+v, want a retry with no status", a)
	}
}

func TestWebhookIDIsStablePerEventAndSink(t *testing.T) {
	a := paymentevents.WebhookID("stripe-abc", "billing")
	if a != paymentevents.WebhookID("stripe-abc", "billing") || a == paymentevents.WebhookID("stripe-abc", "audit") ||
		a == paymentevents.WebhookID("stripe-abd", "billing") || len(a) != len("msg_")+32 {
		t.Fatalf("WebhookID = %q", a)
	}
}

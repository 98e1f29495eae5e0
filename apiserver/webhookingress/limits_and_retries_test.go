package webhookingress_test

// The webhook ingress on a fake client.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
	"github.com/videogen-dev/videogen-operator/apiserver/webhookingress"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

const fakeStripeSecret = "whsec_adv21_stripe"

// paddedStripeEvent is a Stripe event evt, padded with trailing blanks (JSON allows them; they are
// signed like the rest) to exactly size bytes when size > 0.
func paddedStripeEvent(evt string, size int) []byte {
	body := []byte(`{"id":"` + evt + `","object":"event","type":"payment_intent.succeeded","created":1767225590,` +
		`"data":{"object":{"id":"pi_adv21","object":"payment_intent","amount":2000,"amount_received":2000,` +
		`"currency":"usd","status":"succeeded","created":1767225500}}}`)
	if size > len(body) {
		body = append(body, bytes.Repeat([]byte(" "), size-len(body))...)
	}
	return body
}

// postSignedStripe signs body as Stripe does at signedAt and delivers it.
func postSignedStripe(t *testing.T, h http.Handler, body []byte, signedAt time.Time) (int, string) {
	t.Helper()
	ts := strconv.FormatInt(signedAt.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(fakeStripeSecret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	req, err := http.NewRequest(http.MethodPost, "/v1/webhooks/stripe", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(mac.Sum(nil)))
	rec := newRecorder()
	h.ServeHTTP(rec, req)
	return rec.code, rec.body.String()
}

type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func newRecorder() *recorder                    { return &recorder{header: http.Header{}, code: http.StatusOK} }
func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(code int)        { r.code = code }
func storedEvents(cl client.Client) int {
	var list videogenv1alpha1.PaymentEventList
	if err := cl.List(context.Background(), &list); err != nil {
		return -1
	}
	return len(list.Items)
}

func fakeIngress(t *testing.T, now time.Time, maxBody int64) (http.Handler, client.Client) {
	t.Helper()
	cl := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	svc, err := eventservice.New(eventservice.StaticSecrets{"stripe": {fakeStripeSecret}},
		eventservice.WithClock(clocktesting.NewFakePassiveClock(now)))
	if err != nil {
		t.Fatal(err)
	}
	h, err := webhookingress.New(webhookingress.Options{Service: svc, Client: cl, Namespace: "payments", MaxBodyBytes: maxBody,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	return mux, cl
}

// Checked, holds: the edges of the body limit and of Stripe's replay window are where the
// documentation puts them, and a refused delivery stores nothing.
//
// Inputs: a signed body of exactly --webhook-max-body-bytes (accepted: "larger bodies get
// 413"), one byte more (413 payload_too_large, nothing stored), a signature made exactly 300 s
// before or after the ingress's clock (accepted: the tolerance is inclusive, as stripe-go's),
// and 301 s (401 invalid_signature, nothing stored). A processor whose body is at the limit
// must not be refused for good (it would retry for days, then drop the event), and an
// off-by-one in the window would turn every slow retry into a lost event.
func TestBodyLimitAndReplayWindowEdges(t *testing.T) {
	now := time.Unix(1767225600, 0)
	const limit = 4096
	h, cl := fakeIngress(t, now, limit)
	if code, body := postSignedStripe(t, h, paddedStripeEvent("evt_adv21_limit", limit+1), now); code != http.StatusRequestEntityTooLarge ||
		!strings.Contains(body, `"payload_too_large"`) || !strings.Contains(body, `"req_`) {
		t.Errorf("a body one byte over the limit: %d %s, want 413 payload_too_large", code, body)
	}
	if n := storedEvents(cl); n != 0 {
		t.Fatalf("%d PaymentEvents stored after a refused body", n)
	}
	if code, body := postSignedStripe(t, h, paddedStripeEvent("evt_adv21_limit", limit), now); code != http.StatusOK || !strings.Contains(body, `"stored":1`) {
		t.Errorf("a body of exactly the limit: %d %s, want 200 stored", code, body)
	}
	for _, tc := range []struct {
		evt    string
		offset time.Duration
		want   int
	}{
		{"evt_adv21_old_edge", -300 * time.Second, http.StatusOK},
		{"evt_adv21_new_edge", 300 * time.Second, http.StatusOK},
		{"evt_adv21_too_old", -301 * time.Second, http.StatusUnauthorized},
		{"evt_adv21_too_new", 301 * time.Second, http.StatusUnauthorized},
	} {
		before := storedEvents(cl)
		code, body := postSignedStripe(t, h, paddedStripeEvent(tc.evt, 0), now.Add(tc.offset))
		if code != tc.want {
			t.Errorf("signed %v from the clock: %d %s, want %d", tc.offset, code, body, tc.want)
		}
		if stored := storedEvents(cl) - before; (tc.want == http.StatusOK) != (stored == 1) {
			t.Errorf("signed %v from the clock: %d PaymentEvent(s) stored", tc.offset, stored)
		}
	}
}

// Checked, holds: a processor's retry of an event whose PaymentEvent was deleted meanwhile is
// stored again, under the same name (so every sink gets it with the same webhook-id and can
// tell it is the same event), and answered as stored, not as a duplicate of nothing.
//
// Interleaving: (1) Stripe delivers evt; it is stored (200). (2) The PaymentEvent is deleted
// (a retention clean-up, `kubectl delete paymentevents --all` after an incident). (3) Stripe
// sends evt again (its retries run for days; a resend from the dashboard at any time).
func TestRetryAfterTheEventWasDeletedIsStoredAgainUnderItsName(t *testing.T) {
	now := time.Unix(1767225600, 0)
	h, cl := fakeIngress(t, now, 0)
	body := paddedStripeEvent("evt_adv21_deleted", 0)
	if code, out := postSignedStripe(t, h, body, now); code != http.StatusOK {
		t.Fatalf("first delivery: %d %s", code, out)
	}
	var list videogenv1alpha1.PaymentEventList
	if err := cl.List(context.Background(), &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("stored: %v %d", err, len(list.Items))
	}
	first := list.Items[0]
	if err := cl.Delete(context.Background(), &first); err != nil {
		t.Fatal(err)
	}
	code, out := postSignedStripe(t, h, body, now)
	if code != http.StatusOK || !strings.Contains(out, `"duplicate":false`) || !strings.Contains(out, `"stored":1`) {
		t.Fatalf("retry after the deletion: %d %s, want 200 stored", code, out)
	}
	var again videogenv1alpha1.PaymentEvent
	if err := cl.Get(context.Background(), client.ObjectKeyFromObject(&first), &again); err != nil {
		t.Fatalf("not stored again under %s: %v", first.Name, err)
	}
}

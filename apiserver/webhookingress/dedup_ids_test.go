package webhookingress_test

// Payment-event deduplication ids.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"sort"
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

// adyenDisputeItem is one Adyen dispute NotificationRequestItem of the dispute ADV22BDISPUTE001
// on the payment ADV22BPAYMENT001, signed as Adyen documents it (the signature does not cover
// additionalData, so not disputeStatus), computed here with the standard library.
func adyenDisputeItem(t *testing.T, eventCode, disputeStatus string) string {
	t.Helper()
	k, err := hex.DecodeString(adyenHMACKey)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, k)
	mac.Write([]byte("ADV22BDISPUTE001:ADV22BPAYMENT001:TestMerchant:order-22b:1000:EUR:" + eventCode + ":true"))
	return `{"NotificationRequestItem":{"pspReference":"ADV22BDISPUTE001","originalReference":"ADV22BPAYMENT001",` +
		`"merchantAccountCode":"TestMerchant","merchantReference":"order-22b","amount":{"value":1000,"currency":"EUR"},` +
		`"eventCode":"` + eventCode + `","success":"true","eventDate":"2026-01-01T00:00:00+01:00","reason":"Fraud",` +
		`"additionalData":{"disputeStatus":"` + disputeStatus + `","hmacSignature":"` + base64.StdEncoding.EncodeToString(mac.Sum(nil)) + `"}}}`
}

// Adyen gives every notification of one dispute the dispute's pspReference ("All events related
// to a dispute have the same PSP reference", docs.adyen.com/risk-management/disputes-api/
// dispute-notifications), and its table lists several disputeStatus values for one eventCode
// (CHARGEBACK: Undefended, Pending, Lost, Accepted; CHARGEBACK_REVERSED: Pending, Won;
// REQUEST_FOR_INFORMATION: Unresponded, Responded, Expired), the status "at the time of the
// event". So one dispute may get the same eventCode twice with success "true" both times and
// another disputeStatus: the second is another event (the dispute moved on), not a redelivery.
//
// Interleaving, each step a plain delivery: (1) CHARGEBACK with disputeStatus Pending (a
// defended chargeback is booked) is stored, 200; (2) later CHARGEBACK with disputeStatus Lost
// (the defence failed) arrives for the same dispute. Before the fix both items had the id
// "ADV22BDISPUTE001:CHARGEBACK": the second was compared with the first, differed (type
// DISPUTE_LOST vs DISPUTE_CREATED, status), and was answered 409 conflict. Adyen retries a
// non-2xx, gets 409 on every retry, and the loss of the dispute is never stored: sinks and
// operators never see that the money is gone. The same holds for REQUEST_FOR_INFORMATION
// Unresponded then Expired and CHARGEBACK_REVERSED Pending then Won.
//
// Each of them must be stored once (200), and a redelivery of each (Adyen retries until it
// sees a 2xx, and may resend it inside another batch) must be a duplicate, not a third object.
func TestAdyenDisputeStatusChangeUnderOneEventCodeIsStored(t *testing.T) {
	now := time.Unix(1767225600, 0)
	svc, err := eventservice.New(eventservice.StaticSecrets{"adyen": {adyenHMACKey}},
		eventservice.WithClock(clocktesting.NewFakePassiveClock(now)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		code, first, then string
		wantThenType      string
	}{
		{code: "CHARGEBACK", first: "Pending", then: "Lost", wantThenType: "DISPUTE_LOST"},
		// An expired RFI is the inquiry closed, no longer a second DISPUTE_CREATED.
		{code: "REQUEST_FOR_INFORMATION", first: "Unresponded", then: "Expired", wantThenType: "DISPUTE_CLOSED"},
		{code: "CHARGEBACK_REVERSED", first: "Pending", then: "Won", wantThenType: "DISPUTE_WON"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			cl := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
			post := adyenPoster(t, svc, cl)
			first := adyenDisputeItem(t, tc.code, tc.first)
			then := adyenDisputeItem(t, tc.code, tc.then)
			if code, out := post(first); code != http.StatusOK || !strings.Contains(out, `"stored":1`) {
				t.Fatalf("%s %s: %d %s, want 200 stored", tc.code, tc.first, code, out)
			}
			if code, out := post(then); code != http.StatusOK || !strings.Contains(out, `"stored":1`) {
				t.Fatalf("%s %s after %s: %d %s, want 200 stored (the dispute moved on)", tc.code, tc.then, tc.first, code, out)
			}
			// Redeliveries, alone and together in one batch, are duplicates.
			for _, items := range [][]string{{first}, {then}, {then, first}} {
				if code, out := post(items...); code != http.StatusOK || !strings.Contains(out, `"duplicate":true`) {
					t.Fatalf("a redelivery of %d item(s): %d %s, want 200 duplicate", len(items), code, out)
				}
			}
			var list videogenv1alpha1.PaymentEventList
			if err := cl.List(context.Background(), &list, client.InNamespace("payments")); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, pe := range list.Items {
				status := ""
				if pe.Spec.Dispute != nil {
					status = pe.Spec.Dispute.Status
				}
				got = append(got, pe.Spec.EventType+"/"+status)
			}
			sort.Strings(got)
			if len(got) != 2 || !strings.Contains(strings.Join(got, ","), tc.wantThenType+"/"+tc.then) {
				t.Fatalf("stored %v, want the %s and the %s notification once each", got, tc.first, tc.then)
			}
		})
	}
}

// Checked, holds: Stripe's retry of an event is not byte for byte the first delivery: the event
// object's pending_webhooks (how many endpoints still wait for it) changes between attempts, so
// the body hash differs. The ingress then compares what the event says (same evt id, type,
// amount, ids, status) and answers 200 duplicate, one object, not 409 on every retry.
//
// Interleaving: attempt 1 (pending_webhooks 2) is stored but its 2xx is lost (timeout on
// Stripe's side); attempt 2, after another endpoint acknowledged (pending_webhooks 1), signed
// with a new timestamp.
func TestStripeRetryWithAnotherPendingWebhooksIsADuplicate(t *testing.T) {
	now := time.Unix(1767225600, 0)
	h, cl := fakeIngress(t, now, 0)
	event := func(pending int) []byte {
		return []byte(`{"id":"evt_adv22b_retry","object":"event","api_version":"2024-06-20","created":1767225500,` +
			`"livemode":false,"pending_webhooks":` + strconv.Itoa(pending) + `,"request":{"id":null,"idempotency_key":null},` +
			`"type":"charge.dispute.created","data":{"object":{"id":"dp_adv22b","object":"dispute","amount":2000,` +
			`"currency":"usd","charge":"ch_adv22b","payment_intent":"pi_adv22b","reason":"fraudulent",` +
			`"status":"needs_response","created":1767225500}}}`)
	}
	post := func(body []byte, at time.Time) (int, string) {
		req, err := http.NewRequest(http.MethodPost, "/v1/webhooks/stripe", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		ts := strconv.FormatInt(at.Unix(), 10)
		mac := hmac.New(sha256.New, []byte(fakeStripeSecret))
		mac.Write([]byte(ts + "."))
		mac.Write(body)
		req.Header.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(mac.Sum(nil)))
		rec := newRecorder()
		h.ServeHTTP(rec, req)
		return rec.code, rec.body.String()
	}
	if code, out := post(event(2), now); code != http.StatusOK || !strings.Contains(out, `"stored":1`) {
		t.Fatalf("attempt 1: %d %s", code, out)
	}
	if code, out := post(event(1), now.Add(-time.Minute)); code != http.StatusOK || !strings.Contains(out, `"duplicate":true`) {
		t.Fatalf("Stripe's retry with pending_webhooks changed: %d %s, want 200 duplicate", code, out)
	}
	if n := storedEvents(cl); n != 1 {
		t.Fatalf("%d PaymentEvents, want 1", n)
	}
}

// adyenPoster is the ingress of svc storing into cl, and a function posting it one Adyen batch
// of items (signed NotificationRequestItems), answering its status and body.
func adyenPoster(t *testing.T, svc *eventservice.Service, cl client.Client) func(items ...string) (int, string) {
	t.Helper()
	h, err := webhookingress.New(webhookingress.Options{Service: svc, Client: cl, Namespace: "payments",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return func(items ...string) (int, string) {
		body := `{"live":"false","notificationItems":[` + strings.Join(items, ",") + `]}`
		req, err := http.NewRequest(http.MethodPost, "/v1/webhooks/adyen", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetPathValue("connector", "adyen")
		rec := newRecorder()
		h.ServeHTTP(rec, req)
		return rec.code, rec.body.String()
	}
}

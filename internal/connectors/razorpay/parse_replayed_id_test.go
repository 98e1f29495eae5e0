package razorpay_test

import (
	"context"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/razorpay"
)

// Checked, holds: one Razorpay event keeps one id across its
// deliveries, though the id is the hash of the body.
//
// Razorpay's body carries no event id; its x-razorpay-event-id header (which Razorpay's
// integration guide, razorpay.com/docs/payments/payment-gateway/s2s-integration/test-s2s/
// best-practices/retries-and-idempotency, tells merchants to dedupe on) is not signed, so the
// connector hashes the body. That is one id per event only if every delivery of the event has
// the same bytes. Razorpay says so: its webhooks FAQ (razorpay.com/docs/webhooks/faqs) — "If you
// have changed your webhook secret, remember to use the old secret for webhook signature
// validation while retrying older requests": a retry carries the signature made when the event
// was generated, i.e. the body as generated; and its replay page
// (razorpay.com/docs/webhooks/replay-events) — "Replayed events are sent to your endpoint exactly
// as they were originally generated and are signed with your current webhook secret". The body
// holds nothing per attempt (entity, account_id, event, contains, payload, created_at: the
// event's creation time). So a retry (same bytes, same signature), a replay after a secret
// rotation (same bytes, new signature) and a delivery with another x-razorpay-event-id header
// all meet the first delivery's id; another event (another body) gets another id.
func TestRazorpayRetriesAndReplaysKeepOneID(t *testing.T) {
	body := paymentEvent("payment.captured")
	handle := func(secret string, body []byte, eventIDHeader string) *connectors.Event {
		t.Helper()
		req := request(sign(secret, body), body)
		if eventIDHeader != "" {
			req.Headers.Set("X-Razorpay-Event-Id", eventIDHeader)
		}
		ev, err := connectors.HandleWith(context.Background(), razorpay.New(), req,
			connectors.SecretsFromStrings("new-secret", "old-secret"), "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	first := handle("old-secret", body, "Gb5kMCdcAZ8jJ8")
	retry := handle("old-secret", body, "Gb5kMCdcAZ8jJ8")
	replay := handle("new-secret", body, "")
	otherHeader := handle("old-secret", body, "SomeOtherId0001")
	if first.MerchantEventID == "" || retry.MerchantEventID != first.MerchantEventID ||
		replay.MerchantEventID != first.MerchantEventID || otherHeader.MerchantEventID != first.MerchantEventID {
		t.Fatalf("one event, several ids: first %q retry %q replay %q other header %q",
			first.MerchantEventID, retry.MerchantEventID, replay.MerchantEventID, otherHeader.MerchantEventID)
	}
	other := handle("old-secret", paymentEvent("payment.failed"), "")
	if other.MerchantEventID == first.MerchantEventID {
		t.Fatalf("two events share id %q", other.MerchantEventID)
	}
}

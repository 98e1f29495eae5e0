package paymentevents_test

import (
	"strings"
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

// FAILED before the fix (every config below was accepted): a sink filter value that can never
// match was taken as given, and the sink then silently received nothing.
//
// Input: a sinks file whose eventTypes or connectors holds a value no PaymentEvent ever
// carries: the processor's own name ("charge.dispute.created", what a Stripe user knows), the
// type in lower case, a misspelling ("DISPUTE_CREATE"), a connector in another case
// ("Stripe"). ParseSinkConfig already rejects unknown fields because "a typo must not
// silently drop a filter"; a typo inside a filter did exactly that, the other way round.
//
// What happens in production: the manager starts (or reloads) happily; every event is recorded
// without a row for that sink (Forwarded is True with the other sinks, so nothing looks
// wrong), no attempt, no metric, no alert. The loss is for good: sinks are chosen when an
// event is processed, so fixing the file later does not send the events recorded meanwhile,
// and videogen.dev/redeliver only retries rows that exist. The billing team learns of the
// disputes when the processor's deadline has passed.
//
// Fixed: ParseSinkConfig rejects an eventTypes value that is not a normalized type and a
// connectors value that is not a connector name (the CRD's ^[a-z0-9]{1,32}$), naming it.
func TestSinkFilterThatCanNeverMatchIsRejected(t *testing.T) {
	const head = "sinks:\n- name: billing\n  url: https://billing.example/hooks\n  secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n"
	dispute := &videogenv1alpha1.PaymentEventSpec{Connector: "stripe", EventType: "DISPUTE_CREATED"}
	for _, tc := range []struct{ filter, want string }{
		{"  eventTypes: [charge.dispute.created]\n", `eventTypes: "charge.dispute.created" is not a normalized event type`},
		{"  eventTypes: [dispute_created]\n", `eventTypes: "dispute_created" is not a normalized event type`},
		{"  eventTypes: [DISPUTE_CREATED, DISPUTE_CREATE]\n", `eventTypes: "DISPUTE_CREATE" is not a normalized event type`},
		{"  connectors: [Stripe]\n", `connectors: "Stripe" is not a connector name`},
	} {
		cfg, err := paymentevents.ParseSinkConfig([]byte(head + tc.filter))
		if err == nil {
			billing, _ := cfg.Find("billing")
			t.Errorf("%q accepted; the sink takes a Stripe dispute: %v", strings.TrimSpace(tc.filter), billing.Accepts(dispute))
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %q does not say %q", strings.TrimSpace(tc.filter), err, tc.want)
		}
	}
	// Checked, holds: every normalized type, EVENT_TYPE_UNSUPPORTED included, is a valid filter.
	if _, err := paymentevents.ParseSinkConfig([]byte(head + "  eventTypes: [PAYMENT_INTENT_SUCCESS, DISPUTE_CLOSED, EVENT_TYPE_UNSUPPORTED]\n  connectors: [stripe, authorizenet]\n")); err != nil {
		t.Errorf("valid filters refused: %v", err)
	}
}

// FAILED before the fix ("attempt 32: -1606109h32m55s", and attempts 35, 37, 39, 46): the
// backoff doubled its step without bound, so with a maxBackoff beyond 2^62 ns (about 146
// years) the step overflowed int64 and the wait came out negative.
//
// Input: a sinks file ParseSinkConfig accepts, `retry: {maxBackoff: 2000000h, maxAttempts:
// 100}`: an admin asking for "back off as long as it takes, never give up early" (any
// duration Go parses is taken; 2562047h is the largest).
//
// What happens in production: from attempt 32 on, some rows get a NextAttemptAt in the past,
// so the controller retries them at once, reconcile after reconcile: a failing sink is hammered
// in a tight loop (a 5xx loop) and burns its remaining attempts in seconds instead of years.
//
// Fixed in outbound.Exponential (only these retries use it): the step stops at maxWait before
// it can overflow.
func TestBackoffNeverNegative(t *testing.T) {
	cfg, err := paymentevents.ParseSinkConfig([]byte("retry:\n  maxBackoff: 2000000h\n  maxAttempts: 100\n"))
	if err != nil {
		t.Fatal(err)
	}
	prev := cfg.Retry.Delay(1, 0.5)
	for a := int32(2); a <= cfg.Retry.MaxAttempts; a++ {
		d := cfg.Retry.Delay(a, 0.5)
		if d < prev || d > cfg.Retry.MaxBackoff.Duration {
			t.Errorf("wait after attempt %d: %v (after attempt %d: %v); it must grow up to maxBackoff", a, d, a-1, prev)
		}
		prev = d
	}
}

package square_test

import (
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/square"
)

// A tipped Square payment is reported with the amount the buyer
// was charged, not the amount before the tip.
//
// Square's Payment object reference (developer.squareup.com/reference/square/objects/Payment):
// amount_money is "The amount processed for this payment, not including tip_money"; total_money
// (read only) is "The total amount for the payment, including amount_money and tip_money". The
// cash-payments guide (developer.squareup.com/docs/payments-api/take-payments/cash-payments)
// shows it: amount_money 100 and tip_money 50 give total_money 150, "a total of $1.50 to
// collect". Every payment webhook carries the whole Payment object, total_money included.
//
// Input: a card payment of 10.00 USD with a 2.00 USD tip completes; Square sends
// payment.updated COMPLETED with amount_money 1000, tip_money 200, total_money 1200. Before the
// fix the PaymentEvent said PAYMENT_INTENT_SUCCESS of 1000 USD cents: sinks (and
// `kubectl describe paymentevent`) were told 2.00 USD less than the buyer paid, for every
// tipped payment. A body without total_money (older payloads, the tests' own fixtures) keeps
// amount_money.
func TestSquareTippedPaymentReportsTotalCharged(t *testing.T) {
	body := `{"merchant_id":"6SSW7HV8K2ST5","type":"payment.updated","event_id":"0b3c0c7e-24c0-4f2e-9d39-7c4a8d1e2f24",` +
		`"created_at":"2020-11-22T21:19:00.900Z","data":{"type":"payment","id":"TIPPEDpaymentAB24cZY",` +
		`"object":{"payment":{"id":"TIPPEDpaymentAB24cZY","created_at":"2020-11-22T21:16:51.086Z",` +
		`"amount_money":{"amount":1000,"currency":"USD"},"tip_money":{"amount":200,"currency":"USD"},` +
		`"total_money":{"amount":1200,"currency":"USD"},"approved_money":{"amount":1000,"currency":"USD"},` +
		`"status":"COMPLETED","source_type":"CARD","location_id":"S8GWD5R9QB376","version_token":"vTipAB24c"}}}}`
	ev, err := square.New().Parse(&connectors.Request{Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != connectors.PaymentIntentSuccess || ev.Payment == nil {
		t.Fatalf("type %s payment %+v; want PAYMENT_INTENT_SUCCESS", ev.Type, ev.Payment)
	}
	if ev.Payment.AmountMinor != 1200 || ev.Payment.Currency != "USD" {
		t.Fatalf("amount %d %s; want 1200 USD (total_money: amount_money 1000 + tip_money 200)",
			ev.Payment.AmountMinor, ev.Payment.Currency)
	}
}

// Checked, holds (documented, not changed): a delayed capture and
// a later change of the completed payment (a refund adds refund_ids; Square: "payment.updated
// event notification. The Payment object in the notification includes the refund ID",
// developer.squareup.com/docs/payments-api/webhooks) are two payment.updated COMPLETED, each one
// more PAYMENT_INTENT_SUCCESS under its own event_id, with one PaymentID. No field of one event
// says which update completed the payment: version_token is an opaque token, another per
// version (Payment object reference: "Used for optimistic concurrency. This opaque token
// identifies a specific version of the Payment object"), not ordered; updated_at orders
// versions but is not "the capture"; card_details.status CAPTURED and
// card_payment_timeline.captured_at are the same in every later version. Keying the event on
// them would make the later update a 409 conflict (another body under the same id) that Square
// retries until it gives up. Sinks key payments on PaymentID.
func TestSquareCompletedTwiceIsTwoEventsOfOnePayment(t *testing.T) {
	completed := func(eventID, versionToken, extra string) string {
		return `{"merchant_id":"6SSW7HV8K2ST5","type":"payment.updated","event_id":"` + eventID + `",` +
			`"created_at":"2020-11-22T21:19:00.900Z","data":{"type":"payment","id":"DELAYEDcaptureAB24cZY",` +
			`"object":{"payment":{"id":"DELAYEDcaptureAB24cZY","created_at":"2020-11-22T21:16:51.086Z",` +
			`"amount_money":{"amount":1000,"currency":"USD"},"total_money":{"amount":1000,"currency":"USD"},` +
			`"status":"COMPLETED","card_details":{"status":"CAPTURED","card_payment_timeline":{"captured_at":"2020-11-22T21:19:00.832Z"}},` +
			`"version_token":"` + versionToken + `"` + extra + `}}}}`
	}
	capture, _ := square.New().Parse(&connectors.Request{Body: []byte(completed("e-capture-ab24c", "vCaptureAB24c", ""))})
	later, _ := square.New().Parse(&connectors.Request{Body: []byte(completed("e-later-ab24c", "vLaterAB24c", `,"refund_ids":["r1"]`))})
	for _, ev := range []*connectors.Event{capture, later} {
		if ev == nil || ev.Type != connectors.PaymentIntentSuccess || ev.Payment.PaymentID != "DELAYEDcaptureAB24cZY" {
			t.Fatalf("%+v: want PAYMENT_INTENT_SUCCESS of DELAYEDcaptureAB24cZY", ev)
		}
	}
	if capture.MerchantEventID == later.MerchantEventID {
		t.Fatalf("both updates share id %q: the later one would be refused as a conflicting redelivery", capture.MerchantEventID)
	}
}

package square_test

import (
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/square"
)

// Round 24c (open from round 24): a tipped Square payment is reported with the amount the buyer
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
func TestAdv24cSquareTippedPaymentReportsTotalCharged(t *testing.T) {
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

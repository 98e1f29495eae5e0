package controllers

import (
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// A dispute's Warning event names what the processor said the dispute is about, "(unknown)" only
// when it said nothing.
func TestDisputedPayment(t *testing.T) {
	for _, tt := range []struct {
		name string
		d    videogenv1alpha1.PaymentEventDetails
		want string
	}{
		{"payment", videogenv1alpha1.PaymentEventDetails{DisputeID: "du_1", PaymentID: "pi_1", ConnectorTransactionID: "ch_1"},
			"payment pi_1"},
		{"charge only (Stripe, payment_intent null)", videogenv1alpha1.PaymentEventDetails{DisputeID: "du_1", ConnectorTransactionID: "ch_1"},
			"transaction ch_1"},
		{"the dispute's own reference is no payment (Adyen)",
			videogenv1alpha1.PaymentEventDetails{DisputeID: "QFQTPCQ8HXSKGK82", ConnectorTransactionID: "QFQTPCQ8HXSKGK82", MerchantReference: "order-7"},
			`the payment with merchant reference "order-7"`},
		{"nothing", videogenv1alpha1.PaymentEventDetails{DisputeID: "QFQTPCQ8HXSKGK82", ConnectorTransactionID: "QFQTPCQ8HXSKGK82"},
			"payment (unknown)"},
	} {
		if got := disputedPayment(&tt.d); got != tt.want {
			t.Errorf("%s: disputedPayment = %q, want %q", tt.name, got, tt.want)
		}
	}
}

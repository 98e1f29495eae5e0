package controllers

import (
	"testing"

	"k8s.io/utils/ptr"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// An Authorize.net event (its payloads carry no currency, and `make
// run` sets no --authorizenet-currency) was told as "PAYMENT_INTENT_SUCCESS from authorizenet:
// 4500  (minor units)": two spaces where the currency goes, an amount in no currency read as
// if one was left out by mistake. The event now says that the processor gave none.
func TestAmountWithoutCurrencySaysSo(t *testing.T) {
	for _, tc := range []struct {
		spec videogenv1alpha1.PaymentEventSpec
		want string
	}{
		{videogenv1alpha1.PaymentEventSpec{AmountMinor: ptr.To[int64](4500)}, "4500 (minor units, no currency given)"},
		{videogenv1alpha1.PaymentEventSpec{AmountMinor: ptr.To[int64](1000), Currency: "USD"}, "1000 USD (minor units)"},
		{videogenv1alpha1.PaymentEventSpec{}, "no amount"},
	} {
		if got := describeAmount(&tc.spec); got != tc.want {
			t.Errorf("describeAmount(%v %q) = %q, want %q", ptr.Deref(tc.spec.AmountMinor, -1), tc.spec.Currency, got, tc.want)
		}
	}
}

package pricing

import (
	"strconv"
	"strings"
	"testing"
)

// What breaks: Summary (a Template's status.price, the Price column of `kubectl get
// templates`, and its Ready message) reads a durationPrices key with Atoi,
// which takes "05", "+5" and "005" as 5, then looks the price up under "5": a template whose
// only entry is {"05": 20} shows "5s=0, others 10 (default)" (free!), and one with {"5": 20,
// "05": 30} shows "5s=20, 5s=20". Quote, which prices the task, looks the duration up under
// strconv.Itoa(d) only: that task costs 10 (the default), or 20.
//
// Input: a Template with such a key. NOT reachable through the shipped CRDs: the field's key
// rule (^[1-9][0-9]{0,3}$) has been in the schema since its first version, so the kube-apiserver
// never stores one. This is hardening (Summary now reads exactly the keys Quote reads, so the
// two cannot disagree whatever the store holds: a CRD installed without validation, a fake
// client), not a bug a user of the shipped manifests can meet.
//
// What the user sees: a price column saying a duration is free, or listing one twice, where
// tasks are charged otherwise.
func TestSummaryAgreesWithQuoteOnNonCanonicalDurationKeys(t *testing.T) {
	for _, prices := range []map[string]int64{
		{"05": 20},
		{"+5": 20},
		{"5": 20, "05": 30},
		{"005": 7, "6": 8},
	} {
		terms := Terms{Adjustable: true, MinDuration: 5, MaxDuration: 6, DurationPrices: prices}
		s := Summary(terms, 10)
		for d := int32(5); d <= 6; d++ {
			p, err := Quote(terms, &d, 10)
			if err != nil {
				t.Fatal(err)
			}
			tag := strconv.Itoa(int(d)) + "s="
			if n := strings.Count(s, tag); n > 1 {
				t.Errorf("%v: Summary %q names %ds %d times", prices, s, d, n)
			}
			if strings.Contains(s, tag) && !strings.Contains(s, tag+strconv.FormatInt(p, 10)) {
				t.Errorf("%v: Summary %q, but a %ds task costs %d", prices, s, d, p)
			}
			if !strings.Contains(s, tag) && p == 10 && !strings.Contains(s, "10 (default)") {
				t.Errorf("%v: Summary %q does not say a %ds task costs the default 10", prices, s, d)
			}
		}
	}
}

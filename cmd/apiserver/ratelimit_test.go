package main

import (
	"math"
	"testing"
)

// A rate flag that would not limit as written is refused at start: 0 fell back to 50 without a
// word, and a negative rate answered 429 for good after the first burst.
func TestCheckRateRefusesLimitsThatDoNotLimitAsWritten(t *testing.T) {
	for _, tc := range []struct {
		limit float64
		burst int
		ok    bool
	}{
		{50, 100, true},
		{0.5, 1, true},
		{math.Inf(1), 100, true},
		{0, 100, false},
		{-1, 100, false},
		{math.NaN(), 100, false},
		{50, 0, false},
		{50, -3, false},
	} {
		if err := checkRate(tc.limit, tc.burst); (err == nil) != tc.ok {
			t.Errorf("checkRate(%v, %d) = %v, want ok %v", tc.limit, tc.burst, err, tc.ok)
		}
	}
}

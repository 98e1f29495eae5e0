package pricing

import (
	"errors"
	"strings"
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

func ptr[T any](v T) *T { return &v }

func TestQuote(t *testing.T) {
	adjustable := Terms{
		Adjustable:     true,
		MinDuration:    5,
		MaxDuration:    30,
		DurationPrices: map[string]int64{"5": 50, "10": 90, "30": 250},
		Price:          ptr(int64(999)), // ignored for adjustable templates
	}
	tests := []struct {
		name     string
		terms    Terms
		duration *int32
		want     int64
		wantErr  error
	}{
		{name: "fixed template costs its flat price", terms: Terms{Price: ptr(int64(30))}, want: 30},
		{name: "fixed template ignores a requested duration", terms: Terms{Price: ptr(int64(30))}, duration: ptr(int32(999)), want: 30},
		{name: "fixed template without price costs the default", terms: Terms{}, want: 7},
		{name: "free fixed template", terms: Terms{Price: ptr(int64(0))}, want: 0},
		{name: "adjustable uses the duration's price", terms: adjustable, duration: ptr(int32(10)), want: 90},
		{name: "adjustable at the minimum", terms: adjustable, duration: ptr(int32(5)), want: 50},
		{name: "adjustable at the maximum", terms: adjustable, duration: ptr(int32(30)), want: 250},
		{name: "adjustable in range without an entry costs the default", terms: adjustable, duration: ptr(int32(12)), want: 7},
		{name: "adjustable below the range", terms: adjustable, duration: ptr(int32(4)), wantErr: &DurationOutOfRangeError{4, 5, 30}},
		{name: "adjustable above the range", terms: adjustable, duration: ptr(int32(31)), wantErr: &DurationOutOfRangeError{31, 5, 30}},
		{name: "adjustable negative duration", terms: adjustable, duration: ptr(int32(-10)), wantErr: &DurationOutOfRangeError{-10, 5, 30}},
		{name: "adjustable without a duration", terms: adjustable, wantErr: ErrDurationRequired},
		{name: "negative template price is refused", terms: Terms{Price: ptr(int64(-1))}, wantErr: &InvalidPriceError{"template", -1}},
		{name: "negative duration price is refused", terms: Terms{Adjustable: true, MinDuration: 1, MaxDuration: 2, DurationPrices: map[string]int64{"1": -5}}, duration: ptr(int32(1)), wantErr: &InvalidPriceError{"durationPrices[1]", -5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Quote(tt.terms, tt.duration, 7)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("Quote() = %d, want error %v", got, tt.wantErr)
				}
				if !errors.Is(err, tt.wantErr) && err.Error() != tt.wantErr.Error() {
					t.Fatalf("Quote() error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Quote() unexpected error: %v", err)
			}
			if got != tt.want {
				t.Fatalf("Quote() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestQuoteRefusesNegativeDefault(t *testing.T) {
	if _, err := Quote(Terms{}, nil, -1); err == nil {
		t.Fatal("Quote() with a negative default price succeeded")
	}
}

func FuzzQuote(f *testing.F) {
	f.Add(true, int32(5), int32(30), int32(10), int64(90), int64(7))
	f.Add(false, int32(0), int32(0), int32(0), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, adjustable bool, lo, hi, d int32, p, def int64) {
		terms := Terms{Adjustable: adjustable, MinDuration: lo, MaxDuration: hi, Price: &p, DurationPrices: map[string]int64{"10": p}}
		got, err := Quote(terms, &d, def)
		if err == nil && got < 0 {
			t.Fatalf("Quote() returned a negative price %d without error", got)
		}
		if err == nil && adjustable && (d < lo || d > hi) {
			t.Fatalf("Quote() accepted duration %d outside [%d, %d]", d, lo, hi)
		}
	})
}

// A default price is bounded as a Template's: 0 to MaxPoints, the most a top-up can credit.
func TestCheckDefaultBoundsTheDefaultPriceAsATemplatesPrice(t *testing.T) {
	for p, ok := range map[int64]bool{0: true, 10: true, videogenv1alpha1.MaxPoints: true,
		-1: false, videogenv1alpha1.MaxPoints + 1: false, 9223372036854775807: false} {
		if err := CheckDefault(p); (err == nil) != ok {
			t.Errorf("CheckDefault(%d) = %v, want ok %v", p, err, ok)
		}
	}
	if err := CheckDefault(videogenv1alpha1.MaxPoints + 1); err == nil || !strings.Contains(err.Error(), "from 0 to 1000000000 points") {
		t.Errorf("the message does not say the bound: %v", err)
	}
}

func TestSummaryNamesWhatEveryTaskCosts(t *testing.T) {
	for _, tc := range []struct {
		terms Terms
		want  string
	}{
		{Terms{Price: ptr(int64(30))}, "30"},
		{Terms{Price: ptr(int64(0))}, "0"},
		{Terms{}, "10 (default)"},
		{Terms{Adjustable: true, MinDuration: 3, MaxDuration: 10}, "10 (default)"},
		{Terms{Adjustable: true, MinDuration: 3, MaxDuration: 10, DurationPrices: map[string]int64{"5": 20}}, "5s=20, others 10 (default)"},
		{Terms{Adjustable: true, MinDuration: 5, MaxDuration: 6, DurationPrices: map[string]int64{"6": 25, "5": 20}}, "5s=20, 6s=25"},
		{Terms{Adjustable: true, MinDuration: 1, MaxDuration: 60, DurationPrices: map[string]int64{"10": 40, "5": 20, "30": 90, "60": 150}},
			"20-150 by duration, others 10 (default)"},
		{Terms{Adjustable: true, MinDuration: 1, MaxDuration: 4, DurationPrices: map[string]int64{"1": 7, "2": 7, "3": 7, "4": 7}}, "7 by duration"},
	} {
		if got := Summary(tc.terms, 10); got != tc.want {
			t.Errorf("Summary(%+v) = %q, want %q", tc.terms, got, tc.want)
		}
	}
}

package norm

import (
	"testing"
	"time"
)

func TestDecimalToMinor(t *testing.T) {
	tests := []struct {
		in     string
		digits int
		want   int64
		ok     bool
	}{
		{"300.00", 2, 30000, true}, {"300", 2, 30000, true}, {"1.1", 2, 110, true}, {"1.10", 2, 110, true},
		{"0.01", 2, 1, true}, {"-0.5", 2, -50, true}, {"1.500", 2, 150, true}, {"7", 0, 7, true}, {"1.234", 3, 1234, true},
		{"0.001", 2, 0, false}, {"1e3", 2, 0, false}, {"", 2, 0, false}, {".5", 2, 0, false}, {"1.", 2, 100, true},
		{"abc", 2, 0, false}, {"1.2.3", 2, 0, false}, {"+1", 2, 0, false}, {"9999999999999999", 2, 0, false},
	}
	for _, tt := range tests {
		got, err := DecimalToMinor(tt.in, tt.digits)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("DecimalToMinor(%q, %d) = %d, %v; want %d ok=%v", tt.in, tt.digits, got, err, tt.want, tt.ok)
		}
	}
}

func TestTime(t *testing.T) {
	tests := map[string]time.Time{
		"2023-12-12T12:45:09.3492643Z":  time.Date(2023, 12, 12, 12, 45, 9, 349264300, time.UTC),
		"2014-08-06T13:39:03+02:00":     time.Date(2014, 8, 6, 11, 39, 3, 0, time.UTC),
		"2022-08-19T15:34:56.467":       time.Date(2022, 8, 19, 15, 34, 56, 467000000, time.UTC),
		"not a time":                    {},
		"":                              {},
		"2023-05-24T09:12:32.357+00:00": time.Date(2023, 5, 24, 9, 12, 32, 357000000, time.UTC),
		// Outside years 1..9999 in UTC: no protobuf Timestamp, no valid date-time.
		"9999-12-31T23:30:00-01:00": {},
		"0001-01-01T00:30:00+01:00": {},
		"9999-12-31T23:59:59Z":      time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
	}
	for in, want := range tests {
		if got := Time(in); !got.Equal(want) {
			t.Errorf("Time(%q) = %v, want %v", in, got, want)
		}
	}
	if !Unix(0).IsZero() || !Unix(1).Equal(time.Unix(1, 0)) {
		t.Error("Unix")
	}
	if !Unix(253402300800).IsZero() || !Unix(-62135596801).IsZero() || Unix(253402300799).IsZero() {
		t.Error("Unix outside years 1..9999 must be the zero time, and 9999-12-31T23:59:59Z kept")
	}
	if Currency(" usd ") != "USD" {
		t.Error("Currency")
	}
}

package retryafter

import (
	"net/http"
	"testing"
	"time"
)

func TestParseReadsSecondsAndHTTPDates(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{
		{"", 0}, {"3", 3 * time.Second}, {"120", 2 * time.Minute}, {"-4", 0}, {"soon", 0}, {"1.5", 0},
		{now.Add(time.Minute).Format(http.TimeFormat), time.Minute},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
	} {
		h := http.Header{}
		if tc.value != "" {
			h.Set("Retry-After", tc.value)
		}
		if got := Parse(h, now); got != tc.want {
			t.Errorf("Retry-After %q = %v, want %v", tc.value, got, tc.want)
		}
	}
}

package paymentevents_test

import (
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

func TestDefaultBackoffScheduleDoublesToTheCap(t *testing.T) {
	p := paymentevents.RetryPolicy{}.WithDefaults()
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 320 * time.Second, 640 * time.Second, 1280 * time.Second, 2560 * time.Second, time.Hour, time.Hour}
	for i, w := range want {
		attempt := int32(i + 1)
		// jitter 1 (just under) gives the full step, jitter 0 half of it.
		if got := p.Delay(attempt, 0.999999999); got.Round(time.Millisecond) != w {
			t.Errorf("Delay(%d, max jitter) = %s, want %s", attempt, got, w)
		}
		if got := p.Delay(attempt, 0); got != w/2 {
			t.Errorf("Delay(%d, no jitter) = %s, want %s", attempt, got, w/2)
		}
	}
	if p.MaxAttempts != 12 {
		t.Errorf("MaxAttempts = %d, want 12", p.MaxAttempts)
	}
}

func TestBackoffNeverOverflows(t *testing.T) {
	p := paymentevents.RetryPolicy{}.WithDefaults()
	if got := p.Delay(100, 0.5); got <= 0 || got > time.Hour {
		t.Fatalf("Delay(100) = %s", got)
	}
}

package controllers_test

import (
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/controllers"
)

// The manager's defaults are promises made in the README and docs/api.md: finished tasks (and
// so the Idempotency-Keys they carry) are kept at least a day, and a task tells its steps.
func TestDefaultOptionsKeepPromises(t *testing.T) {
	opts := controllers.DefaultOptions()
	if opts.Task.FinishedTTL < 24*time.Hour {
		t.Errorf("finished tasks are kept %v by default, want at least 24h", opts.Task.FinishedTTL)
	}
	if opts.Task.DefaultTimeout <= 0 {
		t.Errorf("default task timeout %v, want > 0", opts.Task.DefaultTimeout)
	}
	if opts.Task.DefaultPrice <= 0 {
		t.Errorf("default price %d, want > 0", opts.Task.DefaultPrice)
	}
	if !opts.Task.TransitionEvents {
		t.Error("task events are off by default")
	}
}

package main

import (
	"encoding/json"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestUseLoggerLeavesNoPlainTextLine: after useLogger, what the packages that take no logger
// write (slog.Default(), the standard log package, client-go's klog) lands in the process's
// JSON logger, not as plain text beside it. useLogger sets process-wide loggers before anything
// runs, as main does, so it runs in a process of its own: this test binary again.
func TestUseLoggerLeavesNoPlainTextLine(t *testing.T) {
	if os.Getenv("USE_LOGGER_CHILD") == "1" {
		useLogger(slog.New(slog.NewJSONHandler(os.Stdout, nil)))
		slog.Default().Warn("from slog.Default", "merchant_event_id", "evt_local_1")
		log.Print("from the log package")
		klog.Warning("from klog")
		klog.Flush()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestUseLoggerLeavesNoPlainTextLine$")
	cmd.Env = append(os.Environ(), "USE_LOGGER_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v, %s", err, out)
	}
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" || line == "PASS" {
			continue
		}
		var m struct{ Msg string }
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line that is not JSON: %q", line)
		}
		msgs = append(msgs, m.Msg)
	}
	if want := []string{"from slog.Default", "from the log package", "from klog"}; strings.Join(msgs, "|") != strings.Join(want, "|") {
		t.Fatalf("logged %q, want %q", msgs, want)
	}
}

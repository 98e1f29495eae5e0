package main

import (
	"bytes"
	"encoding/json"
	"log"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestUseLoggerLeavesNoPlainTextLine: after useLogger, what the packages that take no logger
// write (slog.Default(), the standard log package, client-go's klog) lands in the process's
// JSON logger, not as plain text beside it.
func TestUseLoggerLeavesNoPlainTextLine(t *testing.T) {
	defaultLogger := slog.Default()
	t.Cleanup(func() { slog.SetDefault(defaultLogger); klog.ClearLogger() })
	var out bytes.Buffer
	useLogger(slog.New(slog.NewJSONHandler(&out, nil)))

	slog.Default().Warn("from slog.Default", "merchant_event_id", "evt_local_1")
	log.Print("from the log package")
	klog.Warning("from klog")

	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if line == "" {
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

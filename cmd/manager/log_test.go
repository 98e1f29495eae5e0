package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestUseLoggerTakesKlog: after useLogger, client-go's klog lines (leader election, informers)
// land in the manager's JSON logger, not as plain text on stderr beside it.
func TestUseLoggerTakesKlog(t *testing.T) {
	t.Cleanup(klog.ClearLogger)
	var out bytes.Buffer
	useLogger(zap.New(zap.WriteTo(&out)))

	klog.Info("attempting to acquire leader lease")
	klog.Flush()

	line := strings.TrimSpace(out.String())
	var m struct{ Msg string }
	if err := json.Unmarshal([]byte(line), &m); err != nil || m.Msg != "attempting to acquire leader lease" {
		t.Fatalf("logged %q, want the klog line as JSON", line)
	}
}

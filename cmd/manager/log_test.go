package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestUseLoggerTakesKlog: after useLogger, client-go's klog lines (leader election, informers)
// land in the manager's JSON logger, not as plain text on stderr beside it. useLogger sets
// process-wide loggers before anything runs, as main does, so it runs in a process of its own:
// this test binary again.
func TestUseLoggerTakesKlog(t *testing.T) {
	if os.Getenv("USE_LOGGER_CHILD") == "1" {
		useLogger(zap.New(zap.WriteTo(os.Stdout)))
		klog.Info("attempting to acquire leader lease")
		klog.Flush()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestUseLoggerTakesKlog$")
	cmd.Env = append(os.Environ(), "USE_LOGGER_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v, %s", err, out)
	}
	line := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(out)), "PASS"))
	var m struct{ Msg string }
	if err := json.Unmarshal([]byte(line), &m); err != nil || m.Msg != "attempting to acquire leader lease" {
		t.Fatalf("logged %q, want the klog line as JSON", line)
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// A REST apiserver replica that stopped waiting for a hung manager hangs up; the ledger's
// authentication filter then fails its TokenReview with context.Canceled. That is the caller
// giving up, not an authentication failure: no error line with a stack trace, only a debug line.
func TestACallerThatGaveUpIsNoAuthenticationFailure(t *testing.T) {
	var out bytes.Buffer
	log := quietWhenCallerGaveUp(zap.New(zap.WriteTo(&out), zap.Level(zapcore.DebugLevel)).WithName("ledger-auth"))

	log.Error(fmt.Errorf("token review: %w", context.Canceled), "Authentication failed")
	line := out.String()
	if strings.Contains(line, `"level":"error"`) || strings.Contains(line, "stacktrace") {
		t.Fatalf("a caller that gave up is logged as an authentication failure: %s", line)
	}
	if !strings.Contains(line, `"level":"debug"`) || !strings.Contains(line, "context canceled") {
		t.Fatalf("want one debug line saying the caller gave up, got: %s", line)
	}

	out.Reset()
	log.Error(errors.New("tokenreviews.authentication.k8s.io is forbidden"), "Authentication failed")
	if !strings.Contains(out.String(), `"level":"error"`) {
		t.Fatalf("a real authentication failure is no longer an error: %s", out.String())
	}
}

// At the manager's default level the caller that gave up leaves no line at all.
func TestACallerThatGaveUpIsSilentByDefault(t *testing.T) {
	var out bytes.Buffer
	log := quietWhenCallerGaveUp(zap.New(zap.WriteTo(&out)))
	log.WithValues("path", "/ledger/v1/namespaces/team/balance").Error(context.Canceled, "Authentication failed")
	if out.Len() != 0 {
		t.Fatalf("logged at the default level: %s", out.String())
	}
}

package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// A manager that was stopped (a long GC pause, a frozen node, kill -STOP) finds, when it runs
// again, the ledger calls the REST apiserver replicas sent meanwhile and gave up on: their
// callers are gone. Their tokens are cached, but the SubjectAccessReview of their path was not
// any more (its cache lasts 5 minutes): it was made with the caller's cancelled context, and
// k8s.io/apiserver's webhook authorizer logged "Failed to make webhook authorizer request: …
// context canceled" through klog, an error with a stack trace in the manager's log for each
// call. A caller that gave up is not a failure of authorization: no review is made for it, no
// error line is written, and nothing is done for it.
func TestALedgerCallerThatGaveUpCostsNoReviewAndNoErrorLine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Setenv(watchListEnv, "false")
	env, cfg, c, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	allowed := tokenFor(t, c, "ledger-gave-up", true)

	// The manager's klog goes to its logger (useLogger); the webhook authorizer logs there.
	var logged bytes.Buffer
	log := zap.New(zap.WriteTo(&logged), zap.Level(zapcore.InfoLevel))
	klog.SetLogger(log)
	defer klog.ClearLogger()

	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := ledgerAuth(cfg, hc, quietWhenCallerGaveUp(log))
	if err != nil {
		t.Fatal(err)
	}
	served := 0
	h := auth(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served++ }))

	// The replica's token is accepted and cached.
	req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/ledger/v1/namespaces/team/balance", nil)
	req.Header.Set("Authorization", "Bearer "+allowed)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || served != 1 {
		t.Fatalf("the ledger's client: status %d (%s), served %d, want 200", rec.Code, rec.Body, served)
	}

	// A call on a path not reviewed lately, whose caller hung up before the manager read it.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	req = httptest.NewRequestWithContext(gone, http.MethodPost, "/ledger/v1/namespaces/other/tasks", nil)
	req.Header.Set("Authorization", "Bearer "+allowed)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	klog.Flush()
	if served != 1 {
		t.Errorf("the call of a caller that gave up was served")
	}
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("a caller that gave up: status %d (%s), want 503 as for a review not made", rec.Code, rec.Body)
	}
	if strings.Contains(logged.String(), `"level":"error"`) || strings.Contains(logged.String(), "stacktrace") {
		t.Errorf("a caller that gave up was logged as an error:\n%s", logged.String())
	}
}

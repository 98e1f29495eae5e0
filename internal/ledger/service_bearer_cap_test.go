package ledger

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/videogen-dev/videogen-operator/internal/bearer"
)

// With the bearer cap: the manager's ledger port answers a token longer than
// bearer.MaxTokenBytes 400 invalid_request (malformed), and this Client reads a 4xx it does not
// know as the request's refusal (RefusedError), which the REST apiserver answers its customer
// 400 invalid_request "the bearer token is … bytes": the replica's own credential blamed on
// the customer's request. Input: a token file over the cap (no service account token is, but
// a TokenFile may hold any credential). Want: the Client sends no such token, and says why as
// its own error (the REST apiserver's logged 500), not a refusal of the request.
func TestALedgerTokenOverTheCapIsTheServicesErrorNotTheRequests(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		writeError(w, http.StatusBadRequest, codeInvalid, "the bearer token is too long", nil)
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(strings.Repeat("t", bearer.MaxTokenBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Client{URL: srv.URL, TokenFile: file, Deadline: 2 * time.Second,
		Backoff: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 3}}
	_, err := c.CreateTask(context.Background(), taskNamed("team", "t"), 10)
	var refused *RefusedError
	if err == nil || errors.As(err, &refused) || !strings.Contains(err.Error(), "token") {
		t.Errorf("a create with a ledger token over the cap: %v; want the Client's own error about its token, not a refusal", err)
	}
	if calls.Load() != 0 {
		t.Errorf("the token was sent %d times; want never", calls.Load())
	}
}

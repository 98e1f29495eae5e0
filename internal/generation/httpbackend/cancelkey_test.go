package httpbackend

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
)

// keyCanceller records the cancels by key it is sent and answers them with status.
type keyCanceller struct {
	status int

	mu       sync.Mutex
	requests []string // "METHOD path body"
}

func (k *keyCanceller) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	k.mu.Lock()
	k.requests = append(k.requests, r.Method+" "+r.URL.Path+" "+string(body))
	k.mu.Unlock()
	if k.status == http.StatusNoContent {
		w.WriteHeader(k.status)
		return
	}
	writeJSON(w, k.status, protocol.ErrorBody{Error: protocol.ErrorDetail{Code: "scripted", Message: "scripted"}})
}

func (k *keyCanceller) seen() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.requests...)
}

// A stage whose id never reached the task's status (a Submit that landed while the status
// write recording it was lost to a conflict with a deletion, or a crash) is cancelled by its
// key: Cancel with an empty handle posts w.Key to POST /v1/stages/cancel. It sent nothing
// before, and such a stage ran at the worker until its deadline (the task's timeout plus a
// minute) for a task that was deleted, cancelled or refused.
func TestCancelWithoutAHandleCancelsByKey(t *testing.T) {
	backend := &keyCanceller{status: http.StatusNoContent}
	srv := httptest.NewServer(backend)
	defer srv.Close()
	w := work()
	if err := newClient(t, srv.URL, nil).Cancel(context.Background(), w, ""); err != nil {
		t.Fatal(err)
	}
	got := backend.seen()
	if len(got) != 1 {
		t.Fatalf("requests = %q, want one cancel by key", got)
	}
	parts := strings.SplitN(got[0], " ", 3)
	if parts[0] != "POST" || parts[1] != protocol.CancelByKeyPath {
		t.Errorf("request = %q, want POST %s", got[0], protocol.CancelByKeyPath)
	}
	var req map[string]any
	if err := json.Unmarshal([]byte(parts[2]), &req); err != nil || len(req) != 1 || req["key"] != w.Key {
		t.Errorf("body = %s (%v), want {\"key\":%q}", parts[2], err, w.Key)
	}
}

// An older or third-party backend does not know the endpoint: 404, or 405 (the reference
// worker before it answered POST /v1/stages/cancel 405, its path read as GET
// /v1/stages/{id}'s). Nothing more can be done: the stage ends at its deadline, and the caller
// (a deleted task's finalizer, which waits out errors for CancelGrace) is not held up.
func TestCancelByKeyOnABackendWithoutTheEndpointIsNotAnError(t *testing.T) {
	for _, status := range []int{http.StatusNotFound, http.StatusMethodNotAllowed} {
		backend := &keyCanceller{status: status}
		srv := httptest.NewServer(backend)
		if err := newClient(t, srv.URL, nil).Cancel(context.Background(), work(), ""); err != nil {
			t.Errorf("%d: err = %v, want nil", status, err)
		}
		if got := backend.seen(); len(got) != 1 {
			t.Errorf("%d: requests = %q, want one, not retried", status, got)
		}
		srv.Close()
	}
}

// Other answers are errors as for any call: a refusal is not retried, a 5xx is.
func TestCancelByKeyReportsOtherAnswers(t *testing.T) {
	refused := &keyCanceller{status: http.StatusBadRequest}
	srv := httptest.NewServer(refused)
	defer srv.Close()
	if err := newClient(t, srv.URL, nil).Cancel(context.Background(), work(), ""); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("400: err = %v, want it", err)
	}
	if got := refused.seen(); len(got) != 1 {
		t.Errorf("400: requests = %d, want 1", len(got))
	}
	down := &keyCanceller{status: http.StatusBadGateway}
	srv2 := httptest.NewServer(down)
	defer srv2.Close()
	if err := newClient(t, srv2.URL, nil).Cancel(context.Background(), work(), ""); err == nil {
		t.Error("502: err = nil, want it")
	}
	if got := down.seen(); len(got) != 4 {
		t.Errorf("502: requests = %d, want 4 attempts", len(got))
	}
}

// Work without a key names no stage: nothing is sent.
func TestCancelWithoutAHandleOrAKeySendsNothing(t *testing.T) {
	backend := &keyCanceller{status: http.StatusNoContent}
	srv := httptest.NewServer(backend)
	defer srv.Close()
	w := work()
	w.Key = ""
	if err := newClient(t, srv.URL, nil).Cancel(context.Background(), w, ""); err != nil {
		t.Fatal(err)
	}
	if got := backend.seen(); len(got) != 0 {
		t.Errorf("requests = %q, want none", got)
	}
}

// Against the reference worker's server: a stage submitted and its handle thrown away (the
// status write recording it was lost) is stopped by Cancel with an empty handle, and the slot
// it held is free for the next stage.
func TestCancelWithoutAHandleStopsTheReferenceWorkersStage(t *testing.T) {
	rw, srv := startReferenceWorker(t)
	c := newClient(t, srv.URL, nil)
	ctx := context.Background()
	w := work()
	id, err := c.Submit(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(ctx, w, ""); err != nil {
		t.Fatalf("cancel by key: %v", err)
	}
	if st, _ := rw.table.Get(id); st.State != protocol.StateFailed || st.Message != "cancelled" {
		t.Errorf("after Cancel(w, \"\"): %+v, want failed cancelled", st)
	}
	// The worker runs one stage at a time and queues none: the next is taken, not busy.
	next := work()
	next.Key = "acme/t2/uid-2/analyze"
	if _, err := c.Submit(ctx, next); err != nil {
		t.Errorf("the next stage after the cancel: %v", err)
	}
	// An unknown key is no error either.
	unknown := work()
	unknown.Key = "acme/t1/uid-1/render"
	if err := c.Cancel(ctx, unknown, ""); err != nil {
		t.Errorf("cancel of an unknown key: %v", err)
	}
}

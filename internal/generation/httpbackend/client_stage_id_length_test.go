package httpbackend

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
)

// Input: a backend
// answers POST /v1/stages with 201 and a stage id of 4,000 bytes (a third-party server that
// packs the whole request into its id, or a misbehaving one; the answer may hold up to 1 MiB).
// Submit took any id: the controller recorded it as the stage's handle, the stage ran at the
// backend, and only the first GET /v1/stages/{id} found that the id is unusable: a proxy's 414
// (permanent: client_protocol_types_test.go), or, from a Go server whose request line goes past its header
// limit, a 431, which is an outage polled until the task's timeout. Every poll of the stage
// carried the whole id, and the task's status stored it. The fix: Submit refuses an id over
// protocol.MaxIDBytes at once as a broken answer (a refusal that says the backend broke the
// protocol), after stopping by key the stage the backend started (it is running, and no handle
// of it will ever reach the status). Failed before the fix with Submit returning the 4,000-byte
// id and no cancel sent.
func TestAStageIDTooLongIsRefusedAtSubmit(t *testing.T) {
	long := "stg_" + strings.Repeat("x", 3996)
	w, id, cancels, err := submitAnswering(t, protocol.StageStatus{ID: long, State: protocol.StateRunning})
	if err == nil {
		t.Fatalf("Submit took an id of %d bytes", len(id))
	}
	if !generation.IsPermanent(err) || generation.IsLost(err) {
		t.Errorf("Submit error %v: permanent %v, lost %v; want permanent, not lost", err, generation.IsPermanent(err), generation.IsLost(err))
	}
	if refusal := generation.RefusalOf(err); !strings.Contains(refusal, "protocol") || len(refusal) > 300 {
		t.Errorf("the caller is told %q", refusal)
	}
	if !slices.ContainsFunc(cancels, func(body string) bool { return strings.Contains(body, w.Key) }) {
		t.Errorf("the stage the backend started was not stopped by its key: cancels by key %q", cancels)
	}
}

// submitAnswering submits work() to a backend that answers POST /v1/stages with answer, and
// returns the work, Submit's answer and the bodies of the cancels by key the backend received.
func submitAnswering(t *testing.T, answer protocol.StageStatus) (w generation.Work, id string, cancels []string, err error) {
	t.Helper()
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == protocol.StagesPath:
			writeJSON(rw, http.StatusCreated, answer)
		case r.Method == http.MethodPost && r.URL.Path == protocol.CancelByKeyPath:
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			cancels = append(cancels, string(body))
			mu.Unlock()
			rw.WriteHeader(http.StatusNoContent)
		default:
			rw.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	w = work()
	id, err = newClient(t, srv.URL, nil).Submit(context.Background(), w)
	mu.Lock()
	defer mu.Unlock()
	return w, id, slices.Clone(cancels), err
}

// Checked, holds: an id of protocol.MaxIDBytes is taken as it is.
func TestAStageIDAtTheBoundIsTaken(t *testing.T) {
	id := "stg_" + strings.Repeat("y", protocol.MaxIDBytes-4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusCreated, protocol.StageStatus{ID: id, State: protocol.StateRunning})
	}))
	defer srv.Close()
	got, err := newClient(t, srv.URL, nil).Submit(context.Background(), work())
	if err != nil || got != id {
		t.Fatalf("Submit = %d bytes, %v", len(got), err)
	}
}

// Input: a backend answers POST /v1/stages with
// 201 and JSON whose fields have the wrong type ({"id":12345,"state":"running"}: a numeric id,
// as a server built on an auto-increment column sends it). TestAnAnswerThatBreaksTheProtocolIsPermanent made such an answer to GET
// permanent; to POST it stayed an ordinary error, so the controller took each Submit for an
// outage ("backend unavailable", a Warning) and submitted again at every retry, answered the
// same way (idempotent by key), until the task's timeout, hours later: then TimedOut,
// refunded, the stage stopped by its key only then. The fix: Submit takes such an answer as
// broken (permanent, saying so) after stopping the stage by its key, as for an id too long.
// An answer that is not JSON at all (a proxy's page) stays an outage. Failed before the fix
// with IsPermanent false and no cancel sent.
func TestASubmitAnswerOfTheWrongTypeIsPermanent(t *testing.T) {
	for name, tc := range map[string]struct {
		body string
		want bool
	}{
		"numeric id":   {`{"id":12345,"state":"running"}`, true},
		"html (holds)": {`<html>maintenance</html>`, false},
	} {
		var (
			mu        sync.Mutex
			cancelled bool
		)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == protocol.CancelByKeyPath {
				mu.Lock()
				cancelled = true
				mu.Unlock()
				w.WriteHeader(http.StatusNoContent)
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(tc.body))
		}))
		_, err := newClient(t, srv.URL, nil).Submit(context.Background(), work())
		srv.Close()
		if err == nil {
			t.Errorf("%s: Submit succeeded", name)
			continue
		}
		if got := generation.IsPermanent(err); got != tc.want {
			t.Errorf("%s: IsPermanent(%v) = %v, want %v", name, err, got, tc.want)
		}
		mu.Lock()
		if cancelled != tc.want {
			t.Errorf("%s: cancelled by key %v, want %v", name, cancelled, tc.want)
		}
		mu.Unlock()
		if tc.want && !strings.Contains(generation.RefusalOf(err), "protocol") {
			t.Errorf("%s: the caller is told %q", name, generation.RefusalOf(err))
		}
	}
}

package ledger

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// The ledger Client reads a 201 as the created task,
// and a 201 whose body does not decode (half of it: the connection closed mid-body on a
// response delimited by the connection's close, as an HTTP/1.0 hop or a proxy that lost its
// upstream mid-body sends it) is returned as a plain json error: neither ErrNoAnswer nor a
// refusal. The REST apiserver answers it 500 internal_error, though the 201 says the task was
// created and holds its price; a keyless client told 500 submits again (a second task, a
// second hold). Nothing else in the answer can be trusted, but the status was: the create is
// at least in doubt, and a repeat of the call finds the name taken (ErrTaskExists: the replay
// of a keyed request, ErrNoAnswer for a keyless one).
//
// Interleaving: 1. the Client sends a create; 2. the manager creates the task and its 201
// reaches the replica cut short, delimited by the connection's close; 3. a repeat of the call
// is answered 409 task_exists. Reachable: any hop that frames a response by closing the
// connection (HTTP/1.0, some proxies) and loses its upstream mid-body.
func TestAHalfAnswered201IsNotAPlainError(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 1 {
			writeError(w, http.StatusConflict, codeTaskExists, "a task of that name exists", nil)
			return
		}
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = buf.WriteString("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" +
			`{"metadata":{"name":"t","namespace":"team","uid":"`)
		_ = buf.Flush()
		_ = conn.Close()
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL, Deadline: 5 * time.Second,
		Backoff: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 5}}
	_, err := c.CreateTask(context.Background(), taskNamed("team", "t"), 10)
	if !errors.Is(err, ErrNoAnswer) && !errors.Is(err, ErrTaskExists) {
		t.Fatalf("a create answered 201 with half a body: %v;\nwant it in doubt (ErrNoAnswer) or found by a repeat "+
			"(ErrTaskExists), not a plain error the REST apiserver answers 500", err)
	}
}

package httpbackend

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
	"github.com/videogen-dev/videogen-operator/internal/worker/server"
)

// referenceWorker is the reference worker's server and stage table behind one address, as its
// Service keeps one while its pod is replaced: restart stops it as SIGTERM does (its root
// context ends, killing every running stage, and it waits for them) and starts a new one.
type referenceWorker struct {
	handler atomic.Pointer[http.Handler]
	stop    context.CancelFunc
	table   *jobs.Table
}

func startReferenceWorker(t *testing.T) (*referenceWorker, *httptest.Server) {
	t.Helper()
	rw := &referenceWorker{}
	rw.restart()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*rw.handler.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.Close(); rw.stop(); rw.table.Wait() })
	return rw, srv
}

func (rw *referenceWorker) restart() {
	if rw.stop != nil {
		rw.stop()
		rw.table.Wait()
	}
	root, stop := context.WithCancel(context.Background())
	table := jobs.New(root, jobs.Config{MaxConcurrent: 1, TTL: time.Hour})
	h := server.New(blocking{}, table, server.Auth{Token: "s3cret"}, nil).Handler()
	rw.stop, rw.table = stop, table
	rw.handler.Store(&h)
}

// A rollout of the reference worker: it keeps its stages in memory, so the restarted worker
// answers 404 for the stage it ran. The client says the stage was lost (not that its input was
// refused), and the stage submitted again under the same key runs under a new id.
func TestARestartedReferenceWorkerLosesItsStageAndTakesItAgain(t *testing.T) {
	rw, srv := startReferenceWorker(t)
	c := newClient(t, srv.URL, nil)
	ctx := context.Background()
	w := work()

	id, err := c.Submit(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if obs, err := c.Observe(ctx, w, id); err != nil || obs.State != generation.Running {
		t.Fatalf("before the restart: %+v, %v; want running", obs, err)
	}

	rw.restart()
	_, err = c.Observe(ctx, w, id)
	if !errors.Is(err, generation.ErrStageLost) || !generation.IsPermanent(err) {
		t.Fatalf("observing the stage after the restart: err = %v, want a permanent generation.ErrStageLost", err)
	}
	if generation.RefusalOf(err) != "" {
		t.Errorf("a lost stage reads as a refused input: %q", generation.RefusalOf(err))
	}
	if err := c.Cancel(ctx, w, id); err != nil {
		t.Errorf("cancelling the lost stage: %v, want nil (the worker no longer runs it)", err)
	}

	again, err := c.Submit(ctx, w)
	if err != nil {
		t.Fatalf("submitting the lost stage again: %v", err)
	}
	if again == id {
		t.Errorf("the stage submitted again has the lost stage's id %q", id)
	}
	if obs, err := c.Observe(ctx, w, again); err != nil || obs.State != generation.Running {
		t.Fatalf("the stage submitted again: %+v, %v; want running", obs, err)
	}
	if same, err := c.Submit(ctx, w); err != nil || same != again {
		t.Errorf("a third submit under the key = %q, %v; want %q (Submit stays idempotent)", same, err, again)
	}
}

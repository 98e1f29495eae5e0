package httpbackend

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
)

// A backend whose stage ids start over when it restarts.
//
// Interleaving: task A's analyze stage is submitted and gets id stg-1 (the handle stored in
// A's status). The backend restarts and forgets its stages, as the protocol allows (docs:
// "restarted and forgot all its stages"); its ids count from 1 again, as this package's own
// fake does, and nothing in the protocol asks ids to stay unique across restarts. Task B's
// stage is submitted first after the restart and gets stg-1. A's next look, GET
// /v1/stages/stg-1, is answered with B's stage, whose "key" says so. Every step is reachable
// with any backend that numbers its stages in memory.
//
// Before the fix the client took B's stage for A's: A "succeeded" with B's outputs or
// result, so A's caller was charged and handed B's video, made from B's face (another
// tenant's); and B's work, once A's task ended, was cancelled under A's name. The user sees
// someone else's video. The answer names another key, so A's stage is one the backend no
// longer knows: lost, to be submitted again under A's key.
func TestAStageAnsweredWithAnotherKeysStageIsLost(t *testing.T) {
	fake := newFake()
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c := newClient(t, srv.URL, nil)
	ctx := context.Background()

	a := work()
	id, err := c.Submit(ctx, a)
	if err != nil {
		t.Fatal(err)
	}

	// The backend restarts: its stages are gone and its ids start over.
	fake.mu.Lock()
	fake.byKey, fake.status = map[string]string{}, map[string]protocol.StageStatus{}
	fake.mu.Unlock()
	b := work()
	b.Key, b.Task, b.TaskUID = "other/t9/uid-9/render", "t9", "uid-9"
	b.Namespace, b.Stage = "other", videogenv1alpha1.StageRender
	idB, err := c.Submit(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if idB != id {
		t.Fatalf("the fake did not reuse the id (%q, %q): the test does not test anything", id, idB)
	}
	fake.set(protocol.StageStatus{ID: idB, Key: b.Key, State: protocol.StateSucceeded, Progress: 100,
		Outputs: map[string]string{"face_box": "[1,2,3,4]"},
		Result:  &protocol.Result{URL: "https://media.example/someone-elses.mp4", MediaType: "video/mp4"}})

	obs, err := c.Observe(ctx, a, id)
	if err == nil {
		t.Fatalf("A's look at %s = %+v: another key's stage taken for A's", id, obs)
	}
	if !errors.Is(err, generation.ErrStageLost) {
		t.Errorf("A's look at %s: err = %v, want generation.ErrStageLost (submit A again under its key)", id, err)
	}

	// Checked, holds: an answer that names no key (the field is optional) is taken as before.
	fake.set(protocol.StageStatus{ID: idB, State: protocol.StateRunning})
	if obs, err := c.Observe(ctx, b, idB); err != nil || obs.State != generation.Running {
		t.Errorf("an answer without a key: %+v, %v; want running", obs, err)
	}
}

// Cancelling by a handle that no longer names the stage.
//
// Interleaving (a): as above, a restarted backend that numbers its stages afresh gave A's id
// to B's stage; A is deleted (or cancelled) before its next look, so the controller cancels
// A's stage by the handle in A's status. Before the fix POST /v1/stages/<id>/cancel stopped
// B's stage: B's task failed "cancelled", refunded, for nothing its owner did, and A's stage
// (if submitted again) ran on.
//
// Interleaving (b), with the reference worker: a rollout loses A's stage; the controller
// submits it again under its key (new id) but the status write recording the new id is lost
// (a conflict with the cancel request or the deletion itself); the deletion cancels by the old
// id, which the worker answers 404: before the fix that was "already gone", and the stage
// submitted again ran on to its deadline (the task's timeout plus a minute, up to 30 days
// away), holding one of the worker's few slots. A handle the backend no longer knows, or
// that names another key, is cancelled by the key instead.
func TestCancelByAHandleThatNoLongerNamesTheStage(t *testing.T) {
	t.Run("an id given to another key's stage", func(t *testing.T) {
		fake := newFake()
		var (
			mu      sync.Mutex
			cancels []string
		)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/cancel") {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				cancels = append(cancels, r.URL.Path+" "+strings.TrimSpace(string(body)))
				mu.Unlock()
				r.Body = io.NopCloser(strings.NewReader(string(body)))
			}
			fake.ServeHTTP(w, r)
		}))
		defer srv.Close()
		c := newClient(t, srv.URL, nil)
		ctx := context.Background()
		a := work()
		id, err := c.Submit(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		fake.mu.Lock()
		fake.byKey, fake.status = map[string]string{}, map[string]protocol.StageStatus{}
		fake.mu.Unlock()
		b := work()
		b.Key = "other/t9/uid-9/render"
		if idB, err := c.Submit(ctx, b); err != nil || idB != id {
			t.Fatalf("B's submit = %q, %v; want the reused id %q", idB, err, id)
		}

		if err := c.Cancel(ctx, a, id); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, req := range cancels {
			if strings.HasPrefix(req, protocol.StagesPath+"/"+id+"/cancel") {
				t.Errorf("A's cancel stopped B's stage: %q", cancels)
			}
		}
		if len(cancels) != 1 || !strings.Contains(cancels[0], a.Key) {
			t.Errorf("cancels = %q, want one by A's key", cancels)
		}
	})

	t.Run("a lost stage submitted again under a new id", func(t *testing.T) {
		rw, srv := startReferenceWorker(t)
		c := newClient(t, srv.URL, nil)
		ctx := context.Background()
		w := work()
		old, err := c.Submit(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		rw.restart()
		again, err := c.Submit(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Cancel(ctx, w, old); err != nil {
			t.Fatal(err)
		}
		if st, _ := rw.table.Get(again); st.State != protocol.StateFailed || st.Message != "cancelled" {
			t.Errorf("the stage submitted again after Cancel(w, %q): %+v, want failed cancelled", old, st)
		}
	})
}

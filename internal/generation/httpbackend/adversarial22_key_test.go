package httpbackend

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
)

// Adversarial round 22: a backend whose stage ids start over when it restarts.
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
func TestAdversarial22AStageAnsweredWithAnotherKeysStageIsLost(t *testing.T) {
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

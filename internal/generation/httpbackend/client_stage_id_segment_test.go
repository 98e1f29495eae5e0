package httpbackend

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
)

// Input: a backend
// answers POST /v1/stages with 201 and a stage id that is not one safe URL path segment:
// "cancel" (the cancel-by-key endpoint's own segment, which the protocol says is never an id),
// "." or "..". Submit took it: the controller stored it as the stage's handle, and every look
// at it asked another path (GET /v1/stages/cancel, a request line the client or a proxy cleans
// to /v1/stages or /v1), answered 404 or 405: the stage was taken for lost, submitted again
// under its key (answered with the same id, idempotent by key), twice, and the task failed
// "the backend lost the render stage 3 times (it may have restarted)": a message that lies
// (nothing restarted: the answer broke the protocol), after three submissions whose stage ran
// on at the backend, never stopped (a cancel by id "." names no stage either). The fix: Submit
// refuses such an id as a broken answer, as it refuses one over protocol.MaxIDBytes, after
// stopping by its key the stage the backend started. Failed before the fix with Submit
// returning the id and no cancel by key sent.
func TestAStageIDThatIsNotAPathSegmentIsRefusedAtSubmit(t *testing.T) {
	for _, id := range []string{"cancel", ".", ".."} {
		w, got, cancels, err := submitAnswering(t, protocol.StageStatus{ID: id, State: protocol.StateRunning})
		if err == nil {
			t.Errorf("id %q: Submit took it (%q)", id, got)
			continue
		}
		if !generation.IsPermanent(err) || generation.IsLost(err) {
			t.Errorf("id %q: Submit error %v: permanent %v, lost %v; want permanent, not lost", id, err, generation.IsPermanent(err), generation.IsLost(err))
		}
		if refusal := generation.RefusalOf(err); !strings.Contains(refusal, "protocol") || !strings.Contains(refusal, "stage id") {
			t.Errorf("id %q: the caller is told %q", id, refusal)
		}
		if !slices.ContainsFunc(cancels, func(body string) bool { return strings.Contains(body, w.Key) }) {
			t.Errorf("id %q: the stage the backend started was not stopped by its key", id)
		}
	}
}

// Checked, holds: ids that only look close to the refused ones ("...", ".cancel", "cancel2",
// one with a "/" or a space, which the client escapes into one segment) are taken as they are.
func TestStageIDsThatAreOnePathSegmentAreTaken(t *testing.T) {
	for _, id := range []string{"...", ".cancel", "cancel2", "a/b", "stg 1", "Cancel"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusCreated, protocol.StageStatus{ID: id, State: protocol.StateRunning})
		}))
		got, err := newClient(t, srv.URL, nil).Submit(context.Background(), work())
		srv.Close()
		if err != nil || got != id {
			t.Errorf("id %q: Submit = %q, %v", id, got, err)
		}
	}
}

// Input: a backend answers POST
// /v1/stages with the stage of another key (its idempotency broken: keys cut to a column's
// width, so two long task names in one namespace share one; or a cache keyed wrongly), its
// key echoed in the answer. Submit took its id: the controller's first look (the same
// reconcile) found the other key, took the stage for lost, submitted it again (answered the
// same way) twice, and failed the task "the backend lost the render stage 3 times (it may have
// restarted)": nothing restarted, and the caller, told so, submits again to the same end. The
// fix: Submit refuses an answer carrying another key as a broken answer, saying so, after
// stopping by its key whatever the backend started for ours. Failed before the fix with Submit
// returning the other stage's id.
func TestASubmitAnsweredWithAnotherKeysStageIsRefused(t *testing.T) {
	w, got, cancelled, err := submitAnswering(t, protocol.StageStatus{ID: "stg_7", Key: "other-ns/other-task/other-uid/render", State: protocol.StateSucceeded})
	if err == nil {
		t.Fatalf("Submit took %q, the stage of another key", got)
	}
	if !generation.IsPermanent(err) || generation.IsLost(err) || !strings.Contains(generation.RefusalOf(err), "protocol") {
		t.Errorf("Submit error %v: permanent %v, lost %v, refusal %q", err, generation.IsPermanent(err), generation.IsLost(err), generation.RefusalOf(err))
	}
	if len(cancelled) != 1 || !strings.Contains(cancelled[0], w.Key) {
		t.Errorf("cancels by key: %q, want one for %s (never the other key's)", cancelled, w.Key)
	}
}

// Checked, holds: an answer without a key (the protocol makes it optional) or with ours is taken.
func TestASubmitAnswerWithOurKeyOrNoneIsTaken(t *testing.T) {
	w := work()
	for _, key := range []string{"", w.Key} {
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			writeJSON(rw, http.StatusCreated, protocol.StageStatus{ID: "stg_1", Key: key, State: protocol.StateRunning})
		}))
		got, err := newClient(t, srv.URL, nil).Submit(context.Background(), w)
		srv.Close()
		if err != nil || got != "stg_1" {
			t.Errorf("key %q: Submit = %q, %v", key, got, err)
		}
	}
}

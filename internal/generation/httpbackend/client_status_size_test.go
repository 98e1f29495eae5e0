package httpbackend

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
)

// A stage status larger than the 1 MiB the client reads.
//
// Input: a backend (a third-party one, or any that reports big analyze outputs or a long
// message) answers GET /v1/stages/{id} 200 with a valid status document of 1.5 MiB. The client
// read its first 1 MiB only, which is no JSON ("unexpected end of JSON input"), and reported
// an error that is neither permanent nor a StatusError: the controller took it for an outage,
// wrote "backend unavailable: ... is not a protocol document" with a BackendUnavailable event,
// and polled the same stage, getting the same answer, until the task's timeout (hours), when
// it refunded it. Outputs over the controller's own 256 KiB bound but under 1 MiB fail the
// stage at once with a clear message; this one, larger still, held the task and lied about
// the backend. It is permanent now, and says the answer is too large.
func TestAStatusLargerThanTheClientReadsFailsTheStageAtOnce(t *testing.T) {
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		writeJSON(w, http.StatusOK, protocol.StageStatus{ID: "stg_1", State: protocol.StateSucceeded,
			Outputs: map[string]string{"track": strings.Repeat("x", 1536<<10)}})
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, nil)
	_, err := c.Observe(context.Background(), work(), "stg_1")
	if err == nil || !generation.IsPermanent(err) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("err = %v (permanent: %v), want a permanent error saying the answer is too large", err, generation.IsPermanent(err))
	}
	if n := gets.Load(); n != 1 {
		t.Errorf("the same oversized answer was asked for %d times", n)
	}
}

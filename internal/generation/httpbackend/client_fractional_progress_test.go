package httpbackend

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// docs/backend-protocol.md says a stage's
// progress is "0–100", not that it is an integer, and a backend written in Python (json.dumps of
// a float), JavaScript (a computed 42.5) or any that divides sends 42.5 or 100.0. The client
// decoded progress into an int32: json refuses 42.5 and 100.0 there, so every answer was "not a
// protocol document", an ordinary error. Input: GET /v1/stages/{id} answered 200 with
// {"state":"succeeded","progress":100.0,"result":{…}}. What the user saw: the controller took
// each look for an outage ("backend unavailable: … cannot unmarshal number 100.0 …", a Warning
// event) and polled the finished render until the task's timeout, when it failed TimedOut and
// was refunded: the video was made and never delivered, for every task of that backend. The
// Job backend reads a fractional progress annotation already (parseProgress). The fix: the
// client reads progress as any JSON number, clamped to 0–100 and truncated, as the Job
// backend does.
func TestAFractionalProgressIsRead(t *testing.T) {
	for _, tc := range []struct {
		body  string
		state generation.State
		want  int32
	}{
		{`{"id":"stg_1","state":"running","progress":42.5}`, generation.Running, 42},
		{`{"id":"stg_1","state":"succeeded","progress":100.0,"result":{"url":"https://media.example/r.mp4","media_type":"video/mp4"}}`, generation.Succeeded, 100},
		{`{"id":"stg_1","state":"running","progress":1e3}`, generation.Running, 100},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(tc.body))
		}))
		c := newClient(t, srv.URL, nil)
		obs, err := c.Observe(context.Background(), work(), "stg_1")
		srv.Close()
		if err != nil || obs.State != tc.state || obs.Progress != tc.want {
			t.Errorf("Observe of %s = %+v, %v; want %s at %d%%", tc.body, obs, err, tc.state, tc.want)
		}
	}
}

// As above, for the answer to POST /v1/stages: {"id":…,"state":"running","progress":0.0} made
// every Submit an error, retried at every poll, the stage never recorded, until the timeout.
func TestASubmitAnsweredWithAFractionalProgressIsTaken(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"stg_1","state":"running","progress":0.0}`))
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, nil)
	if h, err := c.Submit(context.Background(), work()); err != nil || h != "stg_1" {
		t.Fatalf("Submit = %q, %v; want stg_1", h, err)
	}
}

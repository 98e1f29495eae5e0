package httpbackend

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
	"github.com/videogen-dev/videogen-operator/internal/worker/server"
)

// submittedBody submits w to a server that keeps the body as sent, and returns its fields.
func submittedBody(t *testing.T, w generation.Work) map[string]json.RawMessage {
	t.Helper()
	bodies := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		bodies <- body
		writeJSON(rw, http.StatusCreated, protocol.StageStatus{ID: "stg-1", State: protocol.StateRunning})
	}))
	defer srv.Close()
	if _, err := newClient(t, srv.URL, nil).Submit(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(<-bodies, &fields); err != nil {
		t.Fatal(err)
	}
	return fields
}

func TestSubmitSendsTheStagesDeadlineInRFC3339(t *testing.T) {
	w := work()
	w.Deadline = time.Date(2031, 5, 6, 7, 8, 9, 0, time.FixedZone("CEST", 2*60*60))
	fields := submittedBody(t, w)
	if got := string(fields["deadline"]); got != `"2031-05-06T05:08:09Z"` {
		t.Errorf("deadline on the wire = %s, want \"2031-05-06T05:08:09Z\"", got)
	}
}

// Work without a deadline sends none, so a backend older than the field sees the request it knew.
func TestSubmitWithoutADeadlineSendsNone(t *testing.T) {
	fields := submittedBody(t, work())
	if got, ok := fields["deadline"]; ok {
		t.Errorf("deadline on the wire = %s, want no deadline field", got)
	}
	if _, ok := fields["key"]; !ok {
		t.Fatalf("the body has no key: %v", fields)
	}
}

// blocking prepares stages that run until their context ends, as a render whose cancel was
// lost does.
type blocking struct{}

func (blocking) Prepare(protocol.StageRequest) (jobs.Func, error) {
	return func(ctx context.Context, _ jobs.Report) (jobs.Outcome, error) {
		<-ctx.Done()
		return jobs.Outcome{}, ctx.Err()
	}, nil
}

// The operator's client and the reference worker together: the deadline the client sends ends
// the stage at the worker with no cancel at all.
func TestTheWorkerEndsAStageAtTheDeadlineTheClientSends(t *testing.T) {
	stopWorker, stop := context.WithCancel(context.Background())
	table := jobs.New(stopWorker, jobs.Config{MaxConcurrent: 1, TTL: time.Hour})
	srv := httptest.NewServer(server.New(blocking{}, table, server.Auth{Token: "s3cret"}, nil).Handler())
	defer func() { srv.Close(); stop(); table.Wait() }()
	c := newClient(t, srv.URL, nil)
	ctx := context.Background()

	w := work()
	w.Deadline = time.Now().Add(300 * time.Millisecond)
	id, err := c.Submit(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(5 * time.Second)
	for {
		obs, err := c.Observe(ctx, w, id)
		if err != nil {
			t.Fatal(err)
		}
		if obs.State == generation.Failed {
			if obs.Message != jobs.PastDeadline {
				t.Errorf("message = %q, want %q", obs.Message, jobs.PastDeadline)
			}
			return
		}
		if time.Now().After(until) {
			t.Fatalf("the stage still runs 5s after its deadline: %+v", obs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/worker/capability"
	"github.com/videogen-dev/videogen-operator/internal/worker/fetcher"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
)

// stalledMedia serves the start of a video and then nothing, until the client goes away: a
// download that would hold its stage (and its worker slot) for as long as the fetch timeout.
func stalledMedia(t *testing.T) (url string, downloading <-chan struct{}) {
	t.Helper()
	started, done := make(chan struct{}, 8), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "video/mp4")
		_, _ = w.Write(make([]byte, 4096))
		w.(http.Flusher).Flush()
		started <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-done: // a failed test does not wait for the fetch timeout
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) })
	return srv.URL + "/template.mp4", started
}

// realWorker is the worker's server over the real pipelines, one stage at a time and none
// queued, with its scratch directories in scratch.
func realWorker(t *testing.T, scratch string) *httptest.Server {
	t.Helper()
	loopback := netguard.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	pipelines := capability.New(capability.Deps{
		Fetcher: fetcher.New(loopback, 50<<20, time.Minute),
		Store:   &blobstore.Dir{Root: t.TempDir()},
		TempDir: scratch,
	})
	table := jobs.New(context.Background(), jobs.Config{MaxConcurrent: 1, MaxQueued: 0, TTL: time.Hour})
	srv := httptest.NewServer(New(pipelines, table, Auth{Disabled: true}, nil).Handler())
	t.Cleanup(func() { srv.Close(); table.Wait() })
	return srv
}

func waitForState(t *testing.T, url, id, state string) map[string]any {
	t.Helper()
	until := time.Now().Add(10 * time.Second)
	for {
		_, st := call(t, "GET", url+"/v1/stages/"+id, "", "")
		if st["state"] == state {
			return st
		}
		if time.Now().After(until) {
			t.Fatalf("stage %s = %v, want %s", id, st, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func stageBody(key, templateURL string, deadline time.Time) string {
	body := `{"key":"` + key + `","capability":"video.template","stage":"analyze","duration":2,"template_media_url":"` + templateURL + `"`
	if !deadline.IsZero() {
		body += `,"deadline":"` + deadline.UTC().Format(time.RFC3339Nano) + `"`
	}
	return body + "}"
}

func scratchEntries(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// A render whose cancel was lost must not hold the worker for ever: at its deadline the stage
// ends failed, its scratch directory goes and the next stage gets its slot.
func TestAStagePastItsDeadlineIsStoppedCleanedUpAndItsSlotFreed(t *testing.T) {
	scratch := t.TempDir()
	srv := realWorker(t, scratch)
	media, downloading := stalledMedia(t)

	code, first := call(t, "POST", srv.URL+"/v1/stages", "", stageBody("ns/late/uid/analyze", media, time.Now().Add(time.Second)))
	if code != 201 {
		t.Fatalf("submit = %d %v", code, first)
	}
	<-downloading
	if n := scratchEntries(t, scratch); n != 1 {
		t.Fatalf("%d scratch directories while the stage downloads, want 1", n)
	}
	if code, body := call(t, "POST", srv.URL+"/v1/stages", "", stageBody("ns/next/uid/analyze", media, time.Time{})); code != 503 {
		t.Fatalf("a second stage while the only slot is held = %d %v, want 503 busy", code, body)
	}

	st := waitForState(t, srv.URL, first["id"].(string), "failed")
	if st["message"] != "the stage passed its deadline" {
		t.Errorf("message = %q, want %q", st["message"], "the stage passed its deadline")
	}
	// The stage's goroutine removes its scratch directory and frees its slot as it returns.
	deadline := time.Now().Add(5 * time.Second)
	for scratchEntries(t, scratch) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the stage's scratch directory is still there after its deadline")
		}
		time.Sleep(10 * time.Millisecond)
	}

	code, next := call(t, "POST", srv.URL+"/v1/stages", "", stageBody("ns/next/uid/analyze", media, time.Now().Add(time.Second)))
	if code != 201 {
		t.Fatalf("the next stage = %d %v, want 201", code, next)
	}
	select {
	case <-downloading: // it got the slot and runs
	case <-time.After(5 * time.Second):
		t.Fatalf("the next stage never started: the late stage's slot was not freed")
	}
	if st := waitForState(t, srv.URL, next["id"].(string), "failed"); st["message"] != "the stage passed its deadline" {
		t.Errorf("next stage message = %q", st["message"])
	}
}

// Without a deadline, a stage runs until it ends or is cancelled, as it did before deadlines.
func TestAStageWithoutADeadlineRunsUntilCancelled(t *testing.T) {
	scratch := t.TempDir()
	srv := realWorker(t, scratch)
	media, downloading := stalledMedia(t)

	_, st := call(t, "POST", srv.URL+"/v1/stages", "", stageBody("ns/t/uid/analyze", media, time.Time{}))
	id := st["id"].(string)
	<-downloading
	time.Sleep(1500 * time.Millisecond)
	if _, st := call(t, "GET", srv.URL+"/v1/stages/"+id, "", ""); st["state"] != "running" {
		t.Fatalf("a stage without a deadline = %v, want running", st)
	}
	call(t, "POST", srv.URL+"/v1/stages/"+id+"/cancel", "", "")
	if st := waitForState(t, srv.URL, id, "failed"); st["message"] != "cancelled" {
		t.Errorf("message = %q", st["message"])
	}
}

// A deadline already past when the stage is submitted is accepted and ends the stage at once,
// without running it: the operator reads why, and submitting the key again finds the stage.
func TestAStageSubmittedPastItsDeadlineEndsAtOnce(t *testing.T) {
	srv := newServer(t, "")
	body := `{"key":"k","capability":"slow","stage":"render","deadline":"2020-01-01T00:00:00Z"}`
	code, st := call(t, "POST", srv.URL+"/v1/stages", "", body)
	if code != 201 || st["state"] != "failed" || st["message"] != "the stage passed its deadline before it started" {
		t.Fatalf("submit past the deadline = %d %v", code, st)
	}
	if code, again := call(t, "POST", srv.URL+"/v1/stages", "", body); code != 200 || again["id"] != st["id"] {
		t.Errorf("resubmission = %d %v, want 200 with the same stage", code, again)
	}
}

func TestAMalformedDeadlineIsRefused(t *testing.T) {
	srv := newServer(t, "")
	code, body := call(t, "POST", srv.URL+"/v1/stages", "", `{"key":"k","capability":"slow","stage":"render","deadline":"tomorrow"}`)
	if code != 400 || errorCode(body) != "invalid_request" {
		t.Errorf("deadline \"tomorrow\" = %d %v, want 400 invalid_request", code, body)
	}
}

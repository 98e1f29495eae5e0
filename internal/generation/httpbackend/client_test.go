package httpbackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
)

// fakeBackend speaks the protocol from memory; failFirst answers the first n requests with it.
type fakeBackend struct {
	mu        sync.Mutex
	byKey     map[string]string
	status    map[string]protocol.StageStatus
	requests  atomic.Int32
	failFirst int32
	failWith  int
	delay     time.Duration
	lastReq   protocol.StageRequest
	lastAuth  string
}

func newFake() *fakeBackend {
	return &fakeBackend{byKey: map[string]string{}, status: map[string]protocol.StageStatus{}}
}

func (f *fakeBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.requests.Add(1)
	// Read the body first: only then does the server notice a client that gave up.
	body, _ := io.ReadAll(r.Body)
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-r.Context().Done():
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastAuth = r.Header.Get("Authorization")
	if n <= f.failFirst {
		writeJSON(w, f.failWith, protocol.ErrorBody{Error: protocol.ErrorDetail{Code: "scripted", Message: "scripted failure"}})
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == protocol.StagesPath:
		var req protocol.StageRequest
		if err := json.Unmarshal(body, &req); err != nil {
			writeJSON(w, 400, protocol.ErrorBody{Error: protocol.ErrorDetail{Code: protocol.CodeInvalidRequest, Message: err.Error()}})
			return
		}
		f.lastReq = req
		if id, ok := f.byKey[req.Key]; ok {
			writeJSON(w, 200, f.status[id])
			return
		}
		id := fmt.Sprintf("stg-%d", len(f.byKey)+1)
		f.byKey[req.Key] = id
		f.status[id] = protocol.StageStatus{ID: id, Key: req.Key, State: protocol.StateRunning}
		writeJSON(w, 201, f.status[id])
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, protocol.StagesPath+"/"):
		st, ok := f.status[strings.TrimPrefix(r.URL.Path, protocol.StagesPath+"/")]
		if !ok {
			writeJSON(w, 404, protocol.ErrorBody{Error: protocol.ErrorDetail{Code: protocol.CodeNotFound, Message: "no such stage"}})
			return
		}
		writeJSON(w, 200, st)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/cancel"):
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeBackend) set(st protocol.StageStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status[st.ID] = st
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func newClient(t *testing.T, url string, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{BaseURL: url, Token: "s3cret", RequestTimeout: time.Second, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func work() generation.Work {
	d := int32(5)
	return generation.Work{
		Key: "acme/t1/uid-1/analyze", Namespace: "acme", Task: "t1", TaskUID: "uid-1",
		Capability: videogenv1alpha1.CapabilityShort, Stage: videogenv1alpha1.StageAnalyze,
		TemplateID: "dance", TemplateMediaURL: "https://media.example/dance.mp4",
		Inputs:            videogenv1alpha1.TaskInputs{FaceImageURL: "https://media.example/face.jpg"},
		FaceImageUploaded: true, TemplateMediaOfficial: true,
		Duration: &d, Previous: map[string]string{"a": "b"},
	}
}

func TestSubmitThenObserveUntilSucceeded(t *testing.T) {
	fake := newFake()
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c := newClient(t, srv.URL+"/", nil)
	ctx := context.Background()

	id, err := c.Submit(ctx, work())
	if err != nil {
		t.Fatal(err)
	}
	if fake.lastAuth != "Bearer s3cret" {
		t.Errorf("Authorization = %q", fake.lastAuth)
	}
	req := fake.lastReq
	if req.Key != work().Key || req.Capability != "video.short" || req.Stage != "analyze" || req.TemplateMediaURL == "" ||
		!req.TemplateMediaOfficial || req.Inputs.FaceImageURL == "" || !req.Inputs.FaceImageUploaded || *req.Duration != 5 || req.Previous["a"] != "b" || req.Task.UID != "uid-1" {
		t.Errorf("request on the wire = %+v", req)
	}

	obs, err := c.Observe(ctx, work(), id)
	if err != nil || obs.State != generation.Running {
		t.Fatalf("Observe = %+v, %v", obs, err)
	}
	fake.set(protocol.StageStatus{ID: id, State: protocol.StateSucceeded, Progress: 100, Outputs: map[string]string{"faces": "1"},
		Result: &protocol.Result{URL: "https://media.example/out.mp4", MediaType: "video/mp4", Metadata: map[string]string{"fps": "15"}}})
	obs, err = c.Observe(ctx, work(), id)
	if err != nil {
		t.Fatal(err)
	}
	if obs.State != generation.Succeeded || obs.Outputs["faces"] != "1" || obs.Result.URL != "https://media.example/out.mp4" ||
		obs.Result.MediaType != "video/mp4" || obs.Result.Metadata["fps"] != "15" {
		t.Errorf("Observe = %+v", obs)
	}
}

func TestObserveReportsFailureAndProgress(t *testing.T) {
	fake := newFake()
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c := newClient(t, srv.URL, nil)
	fake.set(protocol.StageStatus{ID: "a", State: protocol.StateRunning, Progress: 140, Message: "decoding"})
	fake.set(protocol.StageStatus{ID: "b", State: protocol.StateFailed, Message: "no face found in the face image"})
	fake.set(protocol.StageStatus{ID: "c", State: "exploded"})

	if obs, err := c.Observe(context.Background(), work(), "a"); err != nil || obs.Progress != 100 || obs.Message != "decoding" {
		t.Errorf("running: %+v, %v", obs, err)
	}
	if obs, err := c.Observe(context.Background(), work(), "b"); err != nil || obs.State != generation.Failed || !strings.Contains(obs.Message, "no face") {
		t.Errorf("failed: %+v, %v", obs, err)
	}
	if _, err := c.Observe(context.Background(), work(), "c"); err == nil || generation.IsPermanent(err) {
		t.Errorf("unknown state: err = %v, want a retryable error", err)
	}
}

func TestSubmitRetriesServerErrorsThenSucceeds(t *testing.T) {
	fake := newFake()
	fake.failFirst, fake.failWith = 2, http.StatusServiceUnavailable
	srv := httptest.NewServer(fake)
	defer srv.Close()

	id, err := newClient(t, srv.URL, nil).Submit(context.Background(), work())
	if err != nil || id == "" {
		t.Fatalf("Submit = %q, %v", id, err)
	}
	if got := fake.requests.Load(); got != 3 {
		t.Errorf("requests = %d, want 3 (two 503s, then success)", got)
	}
}

func TestSubmitGivesUpAfterMaxAttemptsWithRetryableError(t *testing.T) {
	fake := newFake()
	fake.failFirst, fake.failWith = 100, http.StatusInternalServerError
	srv := httptest.NewServer(fake)
	defer srv.Close()

	_, err := newClient(t, srv.URL, func(c *Config) { c.MaxAttempts = 3 }).Submit(context.Background(), work())
	if err == nil || generation.IsPermanent(err) {
		t.Fatalf("err = %v, want a non-permanent error", err)
	}
	if got := fake.requests.Load(); got != 3 {
		t.Errorf("requests = %d, want 3", got)
	}
}

func TestSubmitRefusedInputIsPermanentAndNotRetried(t *testing.T) {
	fake := newFake()
	fake.failFirst, fake.failWith = 100, http.StatusUnprocessableEntity
	srv := httptest.NewServer(fake)
	defer srv.Close()

	_, err := newClient(t, srv.URL, nil).Submit(context.Background(), work())
	if !generation.IsPermanent(err) || !strings.Contains(err.Error(), "scripted failure") {
		t.Fatalf("err = %v, want a permanent error carrying the backend's message", err)
	}
	if generation.IsLost(err) {
		t.Errorf("err = %v: a refused input is not a lost stage (it must not be submitted again)", err)
	}
	// The caller of the task is told what the backend said, not the HTTP exchange.
	if got := generation.RefusalOf(err); got != "scripted failure" {
		t.Errorf("refusal = %q, want the backend's message alone", got)
	}
	if got := fake.requests.Load(); got != 1 {
		t.Errorf("requests = %d, want 1", got)
	}
}

func TestSubmitWithWrongTokenWaitsInsteadOfFailingTheTask(t *testing.T) {
	fake := newFake()
	fake.failFirst, fake.failWith = 100, http.StatusUnauthorized
	srv := httptest.NewServer(fake)
	defer srv.Close()

	_, err := newClient(t, srv.URL, nil).Submit(context.Background(), work())
	if err == nil || generation.IsPermanent(err) {
		t.Fatalf("err = %v, want a non-permanent error", err)
	}
	if got := fake.requests.Load(); got != 1 {
		t.Errorf("requests = %d, want 1 (4xx is never retried)", got)
	}
}

// A 404 on observe: the backend forgot the stage (a restarted worker), which is permanent for
// that handle and says the stage was lost, so the controller may submit it again.
func TestObserveUnknownStageIsPermanentAndLost(t *testing.T) {
	srv := httptest.NewServer(newFake())
	defer srv.Close()
	_, err := newClient(t, srv.URL, nil).Observe(context.Background(), work(), "nope")
	if !generation.IsPermanent(err) {
		t.Fatalf("err = %v, want permanent", err)
	}
	if !errors.Is(err, generation.ErrStageLost) {
		t.Fatalf("err = %v, want generation.ErrStageLost", err)
	}
	if !strings.Contains(err.Error(), "with 404") {
		t.Errorf("err = %v, want the backend's answer in it", err)
	}
}

func TestCancelOfUnknownStageIsNotAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 404, protocol.ErrorBody{Error: protocol.ErrorDetail{Code: protocol.CodeNotFound, Message: "gone"}})
	}))
	defer srv.Close()
	if err := newClient(t, srv.URL, nil).Cancel(context.Background(), work(), "gone"); err != nil {
		t.Fatal(err)
	}
}

func TestEachAttemptIsBoundedByTheRequestTimeout(t *testing.T) {
	fake := newFake()
	fake.delay = 2 * time.Second
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c := newClient(t, srv.URL, func(c *Config) { c.RequestTimeout, c.MaxAttempts = 50*time.Millisecond, 2 })

	start := time.Now()
	_, err := c.Submit(context.Background(), work())
	if err == nil || generation.IsPermanent(err) {
		t.Fatalf("err = %v, want a retryable timeout", err)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("took %s, want about two 50ms attempts", elapsed)
	}
	if got := fake.requests.Load(); got != 2 {
		t.Errorf("requests = %d, want 2 (a timeout is retried)", got)
	}
}

func TestCancelledContextStopsRetrying(t *testing.T) {
	fake := newFake()
	fake.failFirst, fake.failWith = 100, http.StatusBadGateway
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c := newClient(t, srv.URL, func(c *Config) { c.BaseDelay, c.MaxDelay, c.MaxAttempts = time.Second, time.Second, 10 })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()

	start := time.Now()
	if _, err := c.Submit(ctx, work()); err == nil {
		t.Fatal("want an error")
	}
	if elapsed := time.Since(start); elapsed > 600*time.Millisecond {
		t.Errorf("took %s, want the context's 100ms", elapsed)
	}
}

func TestSubmittingTheSameKeyTwiceReturnsTheSameStage(t *testing.T) {
	fake := newFake()
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c := newClient(t, srv.URL, nil)

	first, err1 := c.Submit(context.Background(), work())
	second, err2 := c.Submit(context.Background(), work())
	if err1 != nil || err2 != nil || first != second {
		t.Fatalf("Submit twice = %q, %q (%v, %v), want the same id", first, second, err1, err2)
	}
}

func TestBackoffGrowsAndStaysBounded(t *testing.T) {
	base, limit := 100*time.Millisecond, time.Second
	for attempt := 1; attempt <= 10; attempt++ {
		want := min(base<<(attempt-1), limit)
		for range 20 {
			if d := backoff(base, limit, attempt); d < want/2 || d > want {
				t.Fatalf("backoff(attempt %d) = %s, want within [%s, %s]", attempt, d, want/2, want)
			}
		}
	}
}

func TestNewRefusesABadBaseURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "/relative", "http://"} {
		if _, err := New(Config{BaseURL: u}); err == nil {
			t.Errorf("New(%q) accepted it", u)
		}
	}
}

// The wait between attempts is the injected clock's: an hour of backoff passes when the test
// steps the clock, not on the wall.
func TestRetryWaitsOnTheInjectedClock(t *testing.T) {
	fake := newFake()
	fake.failFirst, fake.failWith = 1, http.StatusServiceUnavailable
	srv := httptest.NewServer(fake)
	defer srv.Close()
	clk := clocktesting.NewFakeClock(time.Now())
	c := newClient(t, srv.URL, func(cfg *Config) { cfg.BaseDelay, cfg.MaxDelay, cfg.Clock = time.Hour, time.Hour, clk })

	done := make(chan error, 1)
	go func() { _, err := c.Submit(context.Background(), work()); done <- err }()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("Submit never waited on the clock after its first attempt failed")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Submit returned before the clock moved: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Step(time.Hour)
	if err := <-done; err != nil {
		t.Fatalf("Submit after the wait: %v", err)
	}
	if got := fake.requests.Load(); got != 2 {
		t.Errorf("requests = %d, want 2 (a 503, then success)", got)
	}
}

// The manager's task workers poll a backend all at once, round after round: the default client
// keeps those connections open instead of closing all but 2 and dialing them again.
func TestConcurrentCallsKeepTheirConnections(t *testing.T) {
	fake := newFake()
	var dials atomic.Int32
	srv := httptest.NewUnstartedServer(fake)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newClient(t, srv.URL, nil)
	id, err := c.Submit(context.Background(), work())
	if err != nil {
		t.Fatal(err)
	}
	const concurrent, rounds = 32, 5
	for range rounds {
		var wg sync.WaitGroup
		for range concurrent {
			wg.Go(func() {
				if _, err := c.Observe(context.Background(), work(), id); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if n := dials.Load(); n > 2*concurrent {
		t.Fatalf("%d connections dialed for %d calls, %d at a time: want them kept open (at most %d)", n, concurrent*rounds+1, concurrent, 2*concurrent)
	}
}

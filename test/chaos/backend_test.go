package chaos

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
)

// outcome is what the fault-injecting backend does with every stage of one task.
type outcome int

const (
	succeed outcome = iota
	failAnalyze
	failRender
	hangAnalyze
	hangRender
	refuseSubmit
)

var outcomeNames = [...]string{"succeed", "fail-analyze", "fail-render", "hang-analyze", "hang-render", "refuse-submit"}

func (o outcome) String() string { return outcomeNames[o] }

// outcomeOf picks a task's fate from its stage key (<namespace>/<task>/<uid>/<stage>), so that
// both stages of a task agree and a resubmission after a crash meets the same fate.
func outcomeOf(key string) outcome {
	task := key[:max(strings.LastIndexByte(key, '/'), 0)]
	sum := sha256.Sum256([]byte(task))
	switch n := binary.BigEndian.Uint64(sum[:8]) % 100; {
	case n < 55:
		return succeed
	case n < 67:
		return failAnalyze
	case n < 79:
		return failRender
	case n < 86:
		return hangAnalyze
	case n < 93:
		return hangRender
	default:
		return refuseSubmit
	}
}

// faultyBackend speaks the HTTP backend protocol (docs/backend-protocol.md) without doing any
// work: its stages succeed after a short random delay, fail, or run until cancelled, and the
// whole server can be taken down (503 busy, or its listener closed) for a while.
type faultyBackend struct {
	addr string

	mu    sync.Mutex
	byID  map[string]*stage
	byKey map[string]*stage
	srv   *http.Server

	// busy makes every protocol call answer 503 busy.
	busy atomic.Bool

	submits, observes, cancels atomic.Int64
}

type stage struct {
	status   protocol.StageStatus
	doneAt   time.Time // when a succeed/fail stage reaches its end state
	fate     outcome
	isRender bool
}

func startFaultyBackend() (*faultyBackend, error) {
	b := &faultyBackend{byID: map[string]*stage{}, byKey: map[string]*stage{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b.addr = ln.Addr().String()
	b.serve(ln)
	return b, nil
}

func (b *faultyBackend) URL() string { return "http://" + b.addr }

func (b *faultyBackend) serve(ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("POST /v1/stages", b.guard(b.submit))
	mux.HandleFunc("GET /v1/stages/{id}", b.guard(b.observe))
	mux.HandleFunc("POST /v1/stages/{id}/cancel", b.guard(b.cancel))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	b.mu.Lock()
	b.srv = srv
	b.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// closeListener takes the backend off the network: connections are refused until reopen.
func (b *faultyBackend) closeListener() {
	b.mu.Lock()
	srv := b.srv
	b.mu.Unlock()
	_ = srv.Close()
}

// reopen listens again on the same address (bounded retries: the port may linger briefly).
func (b *faultyBackend) reopen() error {
	var err error
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", b.addr); err == nil {
			b.serve(ln)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("reopening the backend on %s: %w", b.addr, err)
}

// forget drops every stage, as the reference worker does when it restarts: a look at one of
// them answers 404, and the operator submits it again under its key.
func (b *faultyBackend) forget() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.byID)
	clear(b.byKey)
}

// Close stops the backend for good.
func (b *faultyBackend) Close() { b.closeListener() }

func (b *faultyBackend) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if b.busy.Load() {
			w.Header().Set("Retry-After", "1")
			writeProtocolError(w, http.StatusServiceUnavailable, protocol.CodeBusy, "the backend is unavailable (fault injection)")
			return
		}
		h(w, r)
	}
}

func (b *faultyBackend) submit(w http.ResponseWriter, r *http.Request) {
	b.submits.Add(1)
	var req protocol.StageRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeProtocolError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, err.Error())
		return
	}
	if req.Key == "" || (req.Stage != "analyze" && req.Stage != "render") {
		writeProtocolError(w, http.StatusUnprocessableEntity, protocol.CodeInvalidRequest, "key and stage are required")
		return
	}
	fate := outcomeOf(req.Key)
	if fate == refuseSubmit {
		writeProtocolError(w, http.StatusUnprocessableEntity, protocol.CodeInvalidRequest, "inputs refused (fault injection)")
		return
	}
	render := req.Stage == "render"
	if render && req.Previous["analysis"] != "ok" {
		writeProtocolError(w, http.StatusUnprocessableEntity, protocol.CodeInvalidRequest, "previous lacks the analysis")
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if st, ok := b.byKey[req.Key]; ok {
		writeJSON(w, http.StatusOK, b.view(st))
		return
	}
	var id [12]byte
	for i := range id {
		id[i] = "0123456789abcdef"[rand.IntN(16)]
	}
	st := &stage{
		status:   protocol.StageStatus{ID: "stg_" + string(id[:]), Key: req.Key, State: protocol.StateRunning},
		doneAt:   time.Now().Add(time.Duration(100+rand.IntN(1400)) * time.Millisecond),
		fate:     fate,
		isRender: render,
	}
	b.byID[st.status.ID], b.byKey[req.Key] = st, st
	writeJSON(w, http.StatusCreated, b.view(st))
}

// view advances a stage to its end state once its time has come; callers hold b.mu.
func (b *faultyBackend) view(st *stage) protocol.StageStatus {
	if st.status.State != protocol.StateRunning {
		return st.status
	}
	hang := (st.fate == hangAnalyze && !st.isRender) || (st.fate == hangRender && st.isRender)
	if hang || time.Now().Before(st.doneAt) {
		st.status.Progress = min(st.status.Progress+10, 90)
		st.status.Message = "working"
		return st.status
	}
	failing := (st.fate == failAnalyze && !st.isRender) || (st.fate == failRender && st.isRender)
	switch {
	case failing:
		st.status.State, st.status.Message = protocol.StateFailed, "the model gave up (fault injection)"
	case st.isRender:
		st.status.State, st.status.Progress, st.status.Message = protocol.StateSucceeded, 100, "done"
		st.status.Result = &protocol.Result{URL: "http://" + b.addr + "/v1/blobs/" + st.status.ID + ".mp4", MediaType: "video/mp4"}
	default:
		st.status.State, st.status.Progress, st.status.Message = protocol.StateSucceeded, 100, "done"
		st.status.Outputs = map[string]string{"analysis": "ok"}
	}
	return st.status
}

func (b *faultyBackend) observe(w http.ResponseWriter, r *http.Request) {
	b.observes.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.byID[r.PathValue("id")]
	if !ok {
		writeProtocolError(w, http.StatusNotFound, protocol.CodeNotFound, "no such stage")
		return
	}
	writeJSON(w, http.StatusOK, b.view(st))
}

func (b *faultyBackend) cancel(w http.ResponseWriter, r *http.Request) {
	b.cancels.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if st, ok := b.byID[r.PathValue("id")]; ok && st.status.State == protocol.StateRunning {
		st.status.State, st.status.Message = protocol.StateFailed, "cancelled"
	}
	w.WriteHeader(http.StatusNoContent)
}

func writeProtocolError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, protocol.ErrorBody{Error: protocol.ErrorDetail{Code: code, Message: message}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

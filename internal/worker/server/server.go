// Package server is the reference worker's HTTP side of the backend protocol
// (docs/backend-protocol.md): submit, observe and cancel stages, behind a bearer token, with
// the protocol's one error shape.
package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/bearer"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
	"github.com/videogen-dev/videogen-operator/internal/worker/capability"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
)

// Preparer turns a stage request into work, or refuses it.
type Preparer interface {
	Prepare(req protocol.StageRequest) (jobs.Func, error)
}

// Server serves the protocol.
type Server struct {
	prep  Preparer
	table *jobs.Table
	auth  Auth
	log   *slog.Logger
}

// Auth says who may call the protocol. The zero value refuses everyone: a worker runs stages
// that fetch URLs and fill disks, so it serves no caller it cannot tell from another.
type Auth struct {
	// Token is the bearer token callers must send ("" accepts none).
	Token string
	// Disabled serves every caller, for a worker nothing else can reach (local use).
	Disabled bool
}

// New returns a server running prepared stages in table for the callers auth admits.
func New(prep Preparer, table *jobs.Table, auth Auth, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	return &Server{prep: prep, table: table, auth: auth, log: log}
}

// maxRequestBytes bounds a submission: it carries URLs and small analyze outputs only.
const maxRequestBytes = 1 << 20

// Handler routes the protocol's endpoints.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+protocol.StagesPath, s.authed(s.submit))
	mux.HandleFunc("GET "+protocol.StagesPath+"/{id}", s.authed(s.observe))
	mux.HandleFunc("POST "+protocol.StagesPath+"/{id}/cancel", s.authed(s.cancel))
	// Cancel by key, for a caller that never learned the stage's id. It shares no request
	// with GET /v1/stages/{id} (POST is neither GET nor HEAD), so the two do not clash and a
	// real id is never shadowed: GET /v1/stages/cancel still reads a stage whose id is
	// "cancel", which never exists (ids are "stg_" and random hex), a 404 not_found.
	mux.HandleFunc("POST "+protocol.CancelByKeyPath, s.authed(s.cancelByKey))
	// The same paths with another method, and paths under them that are none of these: the
	// protocol's error shape (after the token, like every call), not net/http's text.
	mux.HandleFunc(protocol.StagesPath, s.authed(methodNotAllowed(http.MethodPost)))
	mux.HandleFunc(protocol.StagesPath+"/{id}", s.authed(func(w http.ResponseWriter, r *http.Request) {
		allow := http.MethodGet + ", " + http.MethodHead
		if r.PathValue("id") == "cancel" { // a pattern of its own would clash with GET /v1/stages/{id}
			allow += ", " + http.MethodPost
		}
		methodNotAllowed(allow)(w, r)
	}))
	mux.HandleFunc(protocol.StagesPath+"/{id}/cancel", s.authed(methodNotAllowed(http.MethodPost)))
	mux.HandleFunc("/", s.authed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, protocol.CodeNotFound, "no such endpoint: "+r.Method+" "+truncate(r.URL.Path, 200))
	}))
	return mux
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	var req protocol.StageRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "the body is not a stage request: "+describeDecodeError(err))
		return
	}
	fn, err := s.prep.Prepare(req)
	switch {
	case errors.Is(err, capability.ErrUnsupported):
		writeError(w, http.StatusUnprocessableEntity, protocol.CodeUnsupported, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusUnprocessableEntity, protocol.CodeInvalidRequest, err.Error())
		return
	}
	var deadline time.Time // none unless the request sets one
	if req.Deadline != nil {
		deadline = *req.Deadline
	}
	owner := "" // the task's account: its stages share the worker fairly with other accounts'
	if req.Task != nil {
		owner = req.Task.Namespace
	}
	st, created, err := s.table.StartFor(owner, req.Key, deadline, fn)
	if errors.Is(err, jobs.ErrBusy) {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, protocol.CodeBusy, err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, protocol.CodeInternal, err.Error())
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
		attrs := []any{"id", st.ID, "key", req.Key, "capability", req.Capability, "stage", req.Stage}
		if req.Deadline != nil {
			attrs = append(attrs, "deadline", req.Deadline.UTC().Format(time.RFC3339), "state", st.State)
		}
		s.log.Info("stage started", attrs...)
	}
	writeJSON(w, code, st)
}

func (s *Server) observe(w http.ResponseWriter, r *http.Request) {
	st, ok := s.table.Get(r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusNotFound, protocol.CodeNotFound, "no stage "+r.PathValue("id")+" (unknown, or forgotten after its result TTL)")
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// cancel answers 204 even for unknown stages: cancelling what is gone is not an error.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	if s.table.Cancel(r.PathValue("id")) {
		s.log.Info("stage cancelled", "id", r.PathValue("id"))
	}
	w.WriteHeader(http.StatusNoContent)
}

// maxCancelBytes bounds a cancel by key's body: a key and room for fields to come.
const maxCancelBytes = 64 << 10

// cancelByKey stops the stage submitted under a key, for a caller that never learned its id
// (its submission's answer was lost). Like cancel, it answers 204 whether the key is known or
// not. Unknown fields are ignored, as everywhere in the protocol.
func (s *Server) cancelByKey(w http.ResponseWriter, r *http.Request) {
	var req protocol.CancelRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCancelBytes)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "the body is not a cancel request: "+describeDecodeError(err))
		return
	}
	switch {
	case req.Key == "":
		writeError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "key is required")
		return
	case len(req.Key) > protocol.MaxKeyBytes:
		writeError(w, http.StatusBadRequest, protocol.CodeInvalidRequest,
			"key is longer than "+strconv.Itoa(protocol.MaxKeyBytes)+" bytes")
		return
	}
	if s.table.CancelKey(req.Key) {
		s.log.Info("stage cancelled", "key", req.Key)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) authed(next http.HandlerFunc) http.HandlerFunc {
	if s.auth.Disabled {
		return next
	}
	// Digests compare in constant time without revealing the token's length.
	want := sha256.Sum256([]byte(s.auth.Token))
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok, repeated := bearer.FromHeader(r.Header)
		if repeated != nil { // RFC 6750 §3.1; the first read would serve, or refuse, a caller by a header it may not mean
			w.Header().Set("WWW-Authenticate", `Bearer realm="videogen-worker", error="invalid_request"`)
			writeError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, repeated.Error())
			return
		}
		got := sha256.Sum256([]byte(token))
		if !ok || s.auth.Token == "" || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="videogen-worker"`)
			writeError(w, http.StatusUnauthorized, protocol.CodeUnauthorized, "a valid bearer token is required")
			return
		}
		next(w, r)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// describeDecodeError says what is wrong with a body in the protocol's terms (the JSON field,
// the byte), not encoding/json's ("Go struct field StageRequest.key of type string").
func describeDecodeError(err error) string {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
		timeErr   *time.ParseError
		maxErr    *http.MaxBytesError
	)
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return "field " + typeErr.Field + " must be " + httpjson.KindName(typeErr.Type.Kind()) + ", not " + typeErr.Value
	case errors.As(err, &typeErr):
		return "it must be a JSON object, not " + typeErr.Value
	case errors.As(err, &syntaxErr):
		return "malformed JSON at byte " + strconv.FormatInt(syntaxErr.Offset, 10)
	case errors.As(err, &timeErr):
		return "deadline must be an RFC 3339 time"
	case errors.As(err, &maxErr):
		return "it is larger than " + strconv.FormatInt(maxErr.Limit, 10) + " bytes"
	case errors.Is(err, io.EOF):
		return "the body is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the body ends too early"
	}
	return "malformed JSON"
}

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, protocol.CodeMethodNotAllowed, truncate(r.Method, 32)+" is not allowed here; allowed: "+allow)
	}
}

// truncate cuts s to n bytes: an answer does not carry a long path back in full.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func writeError(w http.ResponseWriter, code int, errCode, message string) {
	writeJSON(w, code, protocol.ErrorBody{Error: protocol.ErrorDetail{Code: errCode, Message: message}})
}

// Package httpjson is how every HTTP endpoint of the apiserver speaks: JSON bodies, request ids
// (X-Request-Id: req_…) on every response, and errors shaped
// {"error":{"code","message","request_id"}} with stable codes.
package httpjson

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Stable error codes. Clients branch on these, so they never change meaning.
const (
	CodeInvalidRequest       = "invalid_request"
	CodeInvalidAPIKey        = "invalid_api_key"
	CodeNotFound             = "not_found"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeInsufficientBalance  = "insufficient_balance"
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	CodeIdempotencyKeyInUse  = "idempotency_key_in_use"
	CodeConflict             = "conflict"
	CodeRateLimited          = "rate_limited"
	CodePayloadTooLarge      = "payload_too_large"
	CodeUnsupportedMedia     = "unsupported_media_type"
	CodeInvalidSignature     = "invalid_signature"
	CodeAccountSuspended     = "account_suspended"
	CodeCreateRefused        = "create_refused"
	CodeRequestTimeout       = "request_timeout"
	CodeHeadersTooLarge      = "request_header_fields_too_large"
	CodeInternal             = "internal_error"
	CodeUnavailable          = "service_unavailable"
)

// HeaderRequestID carries the request id on every response.
const HeaderRequestID = "X-Request-Id"

type ctxKey struct{}

// NewRequestID returns a fresh id: "req_" and 24 hex characters.
func NewRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// WithRequestID gives every request an id (a well-formed incoming X-Request-Id is kept, so ids
// can follow a request across services), stores it in the context and sets the response header.
// A request that has an id already (an outer WithRequestID) keeps it, so a handler that may be
// mounted on its own or behind the apiserver can wrap itself and still log the apiserver's id.
func WithRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if RequestID(r.Context()) != "" {
			next.ServeHTTP(w, r)
			return
		}
		id := r.Header.Get(HeaderRequestID)
		if !validRequestID(id) {
			id = NewRequestID()
		}
		w.Header().Set(HeaderRequestID, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, id)))
	})
}

func validRequestID(id string) bool {
	if !strings.HasPrefix(id, "req_") || len(id) > 64 || len(id) < 8 {
		return false
	}
	for _, c := range id[4:] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// RequestID returns the request's id, or "" outside WithRequestID.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// Error is the body of every error response.
type Error struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
}

type errorBody struct {
	Error Error `json:"error"`
}

// WriteError writes {"error":{…}} with status. A message longer than MaxMessageBytes is cut:
// whatever a caller sent, an answer never carries it back in full.
func WriteError(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	message = LimitMessage(message)
	if n, ok := w.(ErrorNoter); ok {
		n.NoteError(code, message)
	}
	WriteJSON(w, status, ErrorBody(code, message, RequestID(r.Context())))
}

// ErrorNoter is a ResponseWriter that keeps the error an answer carried, for the request's log
// line: an operator reading "status 503" learns which 503 it was without the client's copy.
type ErrorNoter interface {
	NoteError(code, message string)
}

// ErrorBody is the error envelope, for writers that cannot use WriteError.
func ErrorBody(code, message, requestID string) any {
	return errorBody{Error: Error{Code: code, Message: message, RequestID: requestID}}
}

// MaxMessageBytes bounds an error message.
const MaxMessageBytes = 1024

// LimitMessage cuts an error message to MaxMessageBytes, for answers not written by WriteError
// (the Event Service's RPC errors).
func LimitMessage(message string) string { return cut(message, MaxMessageBytes) }

// maxEchoBytes bounds a value quoted back to the caller inside a message.
const maxEchoBytes = 64

// Echo quotes a caller's value for an error message, cut to a few dozen bytes with its full
// length said, so that a 15 MB id is not sent back.
func Echo(v string) string {
	if len(v) <= maxEchoBytes {
		return strconv.Quote(v)
	}
	return strconv.Quote(cut(v, maxEchoBytes)) + " (" + strconv.Itoa(len(v)) + " bytes)"
}

// cut shortens s to at most n bytes, without splitting a character, marking the cut with "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	// Drop the bytes of a character cut in half.
	for range utf8.UTFMax - 1 {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s + "…"
}

// WriteJSON writes v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

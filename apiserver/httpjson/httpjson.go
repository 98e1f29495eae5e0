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
	"strings"
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
func WithRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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

// WriteError writes {"error":{…}} with status.
func WriteError(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	WriteJSON(w, status, errorBody{Error: Error{Code: code, Message: message, RequestID: RequestID(r.Context())}})
}

// WriteJSON writes v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

package eventservice

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/videogen-dev/videogen-operator/internal/bearer"
	"github.com/videogen-dev/videogen-operator/internal/filereload"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// TokenAuth admits only callers that send "Authorization: Bearer <token>"
// with one of the accepted service tokens; others get Unauthenticated. It is
// HTTP middleware (see Wrap) and so guards every procedure and protocol
// alike. It is safe for concurrent use.
type TokenAuth struct {
	// SHA-256 digests of the accepted tokens: comparing fixed-length digests
	// in constant time reveals neither the tokens nor their lengths.
	digests atomic.Pointer[[][sha256.Size]byte]
	// file, when the tokens come from one (TokenFileAuth), holds them instead.
	file *filereload.File[fileTokens]
}

var errNoToken = errors.New("eventservice: no service token configured")

// CodeInvalidServiceToken is the error code of a 401 to a request that is not an RPC.
const CodeInvalidServiceToken = "invalid_service_token"

const wwwAuthenticate = `Bearer realm="videogen-events"`

// NewTokenAuth accepts any of tokens; empty ones are ignored, and at least
// one must remain.
func NewTokenAuth(tokens ...string) (*TokenAuth, error) {
	a := &TokenAuth{}
	if err := a.SetTokens(tokens...); err != nil {
		return nil, err
	}
	return a, nil
}

// SetTokens atomically replaces the accepted tokens, e.g. when the Secret
// holding them is rotated. On error the previous tokens stay in force.
// A TokenAuth made by TokenFileAuth follows its file instead.
func (a *TokenAuth) SetTokens(tokens ...string) error {
	if a.file != nil {
		return errTokensFromFile
	}
	digests, err := digestsOf(tokens)
	if err != nil {
		return err
	}
	a.digests.Store(&digests)
	return nil
}

var errTokensFromFile = errors.New("eventservice: the tokens come from a file; change the file")

// minTokenBytes is the shortest service token accepted: a shorter one could be guessed by
// whoever reaches the port, and Handle credits points.
const minTokenBytes = bearer.MinTokenBytes

// digestsOf digests the non-empty tokens; at least one must remain, and each must pass
// checkToken.
func digestsOf(tokens []string) ([][sha256.Size]byte, error) {
	digests := make([][sha256.Size]byte, 0, len(tokens))
	for _, t := range tokens {
		if t == "" {
			continue
		}
		if err := checkToken(t); err != nil {
			return nil, err
		}
		digests = append(digests, sha256.Sum256([]byte(t)))
	}
	if len(digests) == 0 {
		return nil, errNoToken
	}
	return digests, nil
}

// checkToken refuses a token shorter than minTokenBytes or longer than bearer.MaxTokenBytes.
// The error gives its length, never the token: it is logged.
func checkToken(t string) error {
	if len(t) < minTokenBytes {
		return fmt.Errorf("eventservice: a service token of %d bytes; tokens must be at least %d bytes (e.g. openssl rand -hex 32)", len(t), minTokenBytes)
	}
	if len(t) > bearer.MaxTokenBytes {
		// No request can carry it: the token check reads none longer (bearer.FromHeader).
		return fmt.Errorf("eventservice: a service token of %d bytes; tokens must be at most %d bytes", len(t), bearer.MaxTokenBytes)
	}
	return nil
}

// Wrap returns next behind the token check. It runs before the request body
// is read, so unauthenticated callers cannot make the server decode
// messages, and answers in the caller's protocol (gRPC status, gRPC-Web,
// Connect JSON error with HTTP 401).
//
// Wrap alone tells an RPC by its method and Content-Type only; NewHandler's check also knows
// the procedures and the Content-Types served, and answers exactly the requests the handler
// answers in the envelope (an unknown procedure, a form POST) with the envelope too.
func (a *TokenAuth) Wrap(next http.Handler) http.Handler {
	errWriter := connect.NewErrorWriter()
	// connect-go's writer takes a GET for a Connect call, but no procedure here is
	// idempotent, so none is called with GET.
	return a.wrap(next, func(r *http.Request) bool { return errWriter.IsSupported(r) && r.Method == http.MethodPost })
}

// wrap is Wrap, with isRPC telling the requests answered in their protocol's error format from
// those answered with the apiserver's error envelope.
func (a *TokenAuth) wrap(next http.Handler, isRPC func(*http.Request) bool) http.Handler {
	errWriter := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := a.authenticate(r.Header); err != nil {
			// Not an RPC at all: the apiserver's error envelope.
			if !isRPC(r) {
				w.Header().Set("WWW-Authenticate", err.Meta().Get("WWW-Authenticate"))
				if err.Code() == connect.CodeInvalidArgument {
					httpjson.WriteError(w, r, http.StatusBadRequest, httpjson.CodeInvalidRequest, err.Message())
					return
				}
				httpjson.WriteError(w, r, http.StatusUnauthorized, CodeInvalidServiceToken, err.Message())
				return
			}
			_ = errWriter.Write(w, r, err) // the caller hung up if this fails
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *TokenAuth) authenticate(h http.Header) *connect.Error {
	token, ok, repeated := bearer.FromHeader(h)
	if repeated != nil {
		// RFC 6750 §3.1, as the REST API on the same port: a 400 (invalid_argument), not the
		// first header's call served, nor a 401 to a caller whose other header holds a token.
		err := connect.NewError(connect.CodeInvalidArgument, repeated)
		err.Meta().Set("WWW-Authenticate", wwwAuthenticate+`, error="invalid_request"`)
		return err
	}
	if !ok {
		return unauthenticated("missing bearer service token")
	}
	if !a.accepts(token) {
		return unauthenticated("invalid bearer service token")
	}
	return nil
}

func (a *TokenAuth) accepts(token string) bool {
	var digests [][sha256.Size]byte
	if a.file != nil {
		digests = a.file.Current().digests
	} else if d := a.digests.Load(); d != nil {
		digests = *d
	}
	got := sha256.Sum256([]byte(token))
	match := 0
	for _, want := range digests { // no early exit: time does not depend on which token matched
		match |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return match == 1
}

func unauthenticated(msg string) *connect.Error {
	err := connect.NewError(connect.CodeUnauthenticated, errors.New(msg))
	err.Meta().Set("WWW-Authenticate", wwwAuthenticate)
	return err
}

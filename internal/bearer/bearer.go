// Package bearer reads the token of an "Authorization: Bearer <token>" header (RFC 6750). The
// scheme is case-insensitive (RFC 9110, section 11.1): "bearer" and "BEARER" are Bearer.
package bearer

import (
	"fmt"
	"net/http"
	"strings"
)

// MinTokenBytes is the shortest shared secret a server of the project accepts as its bearer
// token: a shorter one is guessed by whoever reaches the port (e.g. openssl rand -hex 32).
const MinTokenBytes = 16

// Check says why a configured token (its ends already trimmed) cannot be used: a control
// character inside (a file of two lines, a stray NUL), which net/http refuses to send in a
// header, so every call would fail before it left; or a token longer than MaxTokenBytes, which
// no server of the project reads (FromHeader). The error does not show the token.
func Check(token string) error {
	if len(token) > MaxTokenBytes {
		return fmt.Errorf("a token of %d bytes; no server reads one longer than %d", len(token), MaxTokenBytes)
	}
	for i := 0; i < len(token); i++ {
		if b := token[i]; b < 0x20 || b == 0x7f {
			return fmt.Errorf("the token has a control character (byte %#x at %d; a file of more than one line?): no request can carry it", b, i)
		}
	}
	return nil
}

// Token returns the token of an Authorization header value, and whether it had one.
func Token(authorization string) (string, bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(authorization), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// MaxTokenBytes is the longest bearer token a server of the project reads. The longest the
// project issues or accepts is a service account token (a JWT of a kilobyte or two; the
// ledger's callers), far below it; without a cap a token could be as long as net/http's header
// limit (1 MiB), and the ledger's port sends each token it has not seen to the kube-apiserver
// as a TokenReview (and on to its token webhooks): 1 MiB a request, from anyone who reaches it.
const MaxTokenBytes = 16 << 10

// FromHeader returns the token of a request's Authorization header and whether it had one, as
// every server of the project reads it. With more than one Authorization header there is no
// token and repeated says how many, in words fit for the answer: the first read and the others
// ignored would act for a caller the client did not choose, or refuse one that sent a valid
// token; RFC 6750 §3.1 makes such a request a 400 invalid_request. A token longer than
// MaxTokenBytes is malformed the same way (no token the project accepts is that long): no
// token, and repeated says so, so that none is looked up, hashed or sent for review.
func FromHeader(h http.Header) (token string, ok bool, repeated error) {
	if n := len(h.Values("Authorization")); n > 1 {
		return "", false, fmt.Errorf("send one Authorization header, not %d", n)
	}
	token, ok = Token(h.Get("Authorization"))
	if len(token) > MaxTokenBytes {
		return "", false, fmt.Errorf("the bearer token is %d bytes; no valid token is longer than %d", len(token), MaxTokenBytes)
	}
	return token, ok, nil
}

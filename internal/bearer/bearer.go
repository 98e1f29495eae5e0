// Package bearer reads the token of an "Authorization: Bearer <token>" header (RFC 6750). The
// scheme is case-insensitive (RFC 9110, section 11.1): "bearer" and "BEARER" are Bearer.
package bearer

import (
	"net/http"
	"strings"
)

// Token returns the token of an Authorization header value, and whether it had one.
func Token(authorization string) (string, bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(authorization), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// FromHeader returns the token of a request's Authorization header and whether it had one, as
// every server of the project reads it. repeated is how many Authorization headers there are
// when more than one: then there is no token. The first read and the others ignored would act
// for a caller the client did not choose, or refuse one that sent a valid token; RFC 6750
// §3.1 makes such a request a 400 invalid_request, whose answer should name repeated.
func FromHeader(h http.Header) (token string, ok bool, repeated int) {
	if n := len(h.Values("Authorization")); n > 1 {
		return "", false, n
	}
	token, ok = Token(h.Get("Authorization"))
	return token, ok, 0
}

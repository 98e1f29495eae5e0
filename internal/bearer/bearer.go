// Package bearer reads the token of an "Authorization: Bearer <token>" header (RFC 6750). The
// scheme is case-insensitive (RFC 9110, section 11.1): "bearer" and "BEARER" are Bearer.
package bearer

import "strings"

// Token returns the token of an Authorization header value, and whether it had one.
func Token(authorization string) (string, bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(authorization), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

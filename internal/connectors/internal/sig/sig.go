// Package sig holds the signature primitives the connectors share, so that
// every comparison goes through hmac.Equal.
package sig

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"strings"
)

// Usable drops empty secrets: an empty key would make any HMAC computable by
// anyone, so it must never count as "a secret is configured".
func Usable(secrets [][]byte) [][]byte {
	out := make([][]byte, 0, len(secrets))
	for _, s := range secrets {
		if len(s) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// Match reports whether any candidate signature equals mac(key) for any key.
// Each comparison is constant-time in the signature bytes.
func Match(keys [][]byte, candidates [][]byte, mac func(key []byte) []byte) bool {
	for _, key := range keys {
		want := mac(key)
		for _, got := range candidates {
			if hmac.Equal(want, got) {
				return true
			}
		}
	}
	return false
}

// HMACSHA256 returns HMAC-SHA256(key, parts[0] || parts[1] || ...).
func HMACSHA256(key []byte, parts ...[]byte) []byte { return sum(sha256.New, key, parts) }

// HMACSHA512 returns HMAC-SHA512(key, parts[0] || parts[1] || ...).
func HMACSHA512(key []byte, parts ...[]byte) []byte { return sum(sha512.New, key, parts) }

func sum(h func() hash.Hash, key []byte, parts [][]byte) []byte {
	mac := hmac.New(h, key)
	for _, p := range parts {
		mac.Write(p)
	}
	return mac.Sum(nil)
}

// HeaderScheme is the most common way processors sign a webhook: one header carries a MAC of
// the request, made with the shared secret. Connectors differ only in the header, how its value
// is encoded, and what is signed; Checkout.com, Razorpay and Authorize.net are this scheme.
type HeaderScheme struct {
	Header string
	// Format names the value's encoding in errors ("hex", `"sha512=<hex>"`).
	Format string
	// Decode turns the header's value into the MAC's bytes; ok is false when it is malformed.
	Decode func(value string) (mac []byte, ok bool)
}

// Verify checks value (the header's, as received) against mac(key) for every usable secret.
// It returns "" on a match, else the reason, for the connector's AuthError.
func (s HeaderScheme) Verify(value string, secrets [][]byte, mac func(key []byte) []byte) (reason string) {
	keys := Usable(secrets)
	if len(keys) == 0 {
		return "no webhook secret configured"
	}
	value = strings.TrimSpace(value)
	if value == "" {
		return "missing " + s.Header + " header"
	}
	got, ok := s.Decode(value)
	if !ok {
		return s.Header + " header is not " + s.Format
	}
	if !Match(keys, [][]byte{got}, mac) {
		return "signature matches no configured secret"
	}
	return ""
}

// Hex decodes a hex MAC (either case).
func Hex(value string) ([]byte, bool) {
	b, err := hex.DecodeString(value)
	return b, err == nil
}

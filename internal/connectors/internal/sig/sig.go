// Package sig holds the signature primitives the connectors share, so that
// every comparison goes through hmac.Equal.
package sig

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
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

// Package standardwebhooks signs and verifies webhooks the Standard Webhooks way
// (https://www.standardwebhooks.com): headers webhook-id, webhook-timestamp and
// webhook-signature "v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">", with a secret
// "whsec_<base64 key>". It forwards payment events to sinks and serves any other outgoing
// webhook of this project.
package standardwebhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names, lower case as the specification writes them (http.Header canonicalizes).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every secret; the base64 text after it is the key.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a timestamp may be from the receiver's clock.
const DefaultTolerance = 5 * time.Minute

// Errors Verify wraps.
var (
	ErrMissingHeaders      = errors.New("standardwebhooks: missing webhook-id, webhook-timestamp or webhook-signature")
	ErrInvalidTimestamp    = errors.New("standardwebhooks: webhook-timestamp is not a unix time")
	ErrTimestampOutOfRange = errors.New("standardwebhooks: webhook-timestamp outside the tolerance")
	ErrNoMatchingSignature = errors.New("standardwebhooks: no matching signature")
)

// DecodeSecret returns the key of a "whsec_<base64>" secret. The prefix is optional, as in the
// reference libraries; an empty key is an error because it would authenticate nothing.
func DecodeSecret(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return nil, fmt.Errorf("standardwebhooks: secret is not whsec_ followed by base64: %w", err)
	}
	if len(key) == 0 {
		return nil, errors.New("standardwebhooks: secret has an empty key")
	}
	return key, nil
}

// NewSecret returns a fresh random secret with a 32-byte key.
func NewSecret() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// Sign returns the webhook-signature value "v1,<base64>" for one attempt.
func Sign(secret, id string, timestamp time.Time, body []byte) (string, error) {
	key, err := DecodeSecret(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, timestamp.Unix(), body)), nil
}

// SetHeaders signs body and sets the three headers on h. With several secrets (a rotation in
// progress) the signature header carries one space-separated signature per secret, so a
// receiver holding either secret verifies the message.
func SetHeaders(h http.Header, secret, id string, timestamp time.Time, body []byte, more ...string) error {
	sig, err := Sign(secret, id, timestamp, body)
	if err != nil {
		return err
	}
	for _, other := range more {
		extra, err := Sign(other, id, timestamp, body)
		if err != nil {
			return err
		}
		sig += " " + extra
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(timestamp.Unix(), 10))
	h.Set(HeaderSignature, sig)
	return nil
}

// Verify checks that h carries a v1 signature of body made with secret, and a timestamp
// within tolerance of now (DefaultTolerance when tolerance is 0). Several space-separated
// signatures are allowed, as during a secret rotation.
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	key, err := DecodeSecret(secret)
	if err != nil {
		return err
	}
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingHeaders
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q", ErrInvalidTimestamp, ts)
	}
	if tolerance == 0 {
		tolerance = DefaultTolerance
	}
	if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: %s away", ErrTimestampOutOfRange, d.Round(time.Second))
	}
	want := mac(key, id, unix, body)
	for _, versioned := range strings.Fields(sigs) {
		version, encoded, ok := strings.Cut(versioned, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(encoded)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrNoMatchingSignature
}

func mac(key []byte, id string, unix int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, unix, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

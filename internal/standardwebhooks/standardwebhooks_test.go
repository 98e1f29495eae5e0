package standardwebhooks_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	reference "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

// The published vector of the reference libraries
// (standard-webhooks/standard-webhooks libraries/go/webhook_test.go, TestWebhookSign),
// re-checked with:
//
//	printf '%s' 'msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}' |
//	  openssl dgst -sha256 -mac HMAC -macopt hexkey:$(printf MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw | base64 -d | xxd -p -c 256) -binary | base64
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorUnix      = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignMatchesThePublishedVector(t *testing.T) {
	got, err := standardwebhooks.Sign(vectorSecret, vectorID, time.Unix(vectorUnix, 0), []byte(vectorBody))
	if err != nil {
		t.Fatal(err)
	}
	if got != vectorSignature {
		t.Fatalf("Sign = %q, want %q", got, vectorSignature)
	}
}

func TestReferenceLibraryVerifiesOurHeaders(t *testing.T) {
	secret := standardwebhooks.NewSecret()
	body := []byte(`{"type":"payment_event.dispute_created","data":{"id":"stripe-abc"}}`)
	h := http.Header{}
	if err := standardwebhooks.SetHeaders(h, secret, "msg_1", time.Now(), body); err != nil {
		t.Fatal(err)
	}
	wh, err := reference.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(body, h); err != nil {
		t.Fatalf("reference library rejected our signature: %v", err)
	}
	if err := wh.Verify(append(body, ' '), h); err == nil {
		t.Fatal("reference library accepted a tampered body")
	}
}

func TestVerifyAcceptsTheReferenceLibrarysSignature(t *testing.T) {
	secret := standardwebhooks.NewSecret()
	wh, err := reference.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	body := []byte(`{"hello":"world"}`)
	sig, err := wh.Sign("msg_2", now, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", "msg_2")
	h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("webhook-signature", "v1,bm90IHRoaXMgb25l "+sig) // an old signature first, as in a rotation
	if err := standardwebhooks.Verify(secret, h, body, now, 0); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

func TestVerifyRejects(t *testing.T) {
	secret := standardwebhooks.NewSecret()
	now := time.Unix(1767225600, 0)
	body := []byte(`{}`)
	signed := func() http.Header {
		h := http.Header{}
		if err := standardwebhooks.SetHeaders(h, secret, "msg_3", now, body); err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, tc := range []struct {
		name   string
		edit   func(http.Header)
		secret string
		now    time.Time
		body   []byte
		want   error
	}{
		{name: "missing id", edit: func(h http.Header) { h.Del("webhook-id") }, want: standardwebhooks.ErrMissingHeaders},
		{name: "changed id", edit: func(h http.Header) { h.Set("webhook-id", "msg_4") }, want: standardwebhooks.ErrNoMatchingSignature},
		{name: "garbled timestamp", edit: func(h http.Header) { h.Set("webhook-timestamp", "soon") }, want: standardwebhooks.ErrInvalidTimestamp},
		{name: "stale timestamp", now: now.Add(6 * time.Minute), want: standardwebhooks.ErrTimestampOutOfRange},
		{name: "future timestamp", now: now.Add(-6 * time.Minute), want: standardwebhooks.ErrTimestampOutOfRange},
		{name: "other secret", secret: standardwebhooks.NewSecret(), want: standardwebhooks.ErrNoMatchingSignature},
		{name: "tampered body", body: []byte(`{"a":1}`), want: standardwebhooks.ErrNoMatchingSignature},
		{name: "unknown version only", edit: func(h http.Header) { h.Set("webhook-signature", "v2,"+h.Get("webhook-signature")[3:]) }, want: standardwebhooks.ErrNoMatchingSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := signed()
			if tc.edit != nil {
				tc.edit(h)
			}
			s, at, b := secret, now, body
			if tc.secret != "" {
				s = tc.secret
			}
			if !tc.now.IsZero() {
				at = tc.now
			}
			if tc.body != nil {
				b = tc.body
			}
			if err := standardwebhooks.Verify(s, h, b, at, 0); !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestDecodeSecretRejectsUnusableSecrets(t *testing.T) {
	for _, s := range []string{"whsec_", "", "whsec_not base64!"} {
		if _, err := standardwebhooks.DecodeSecret(s); err == nil {
			t.Errorf("DecodeSecret(%q) accepted it", s)
		}
	}
}

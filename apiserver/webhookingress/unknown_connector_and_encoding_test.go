package webhookingress_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// POST /v1/webhooks/<200 x's> was answered `no webhook connector named
// "xxx…"`: cut, but without the length docs/api.md promises for every value quoted back ("cut to
// 64 bytes with their length said"), so the caller could not tell a typo from a cut name. It is
// quoted as every other error of the apiserver quotes a value now.
func TestUnknownConnectorIsQuotedWithItsLength(t *testing.T) {
	h, _ := fakeIngress(t, time.Unix(1767225600, 0), 0)
	name := strings.Repeat("x", 200)
	req, err := http.NewRequest(http.MethodPost, "/v1/webhooks/"+name, bytes.NewReader([]byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	h.ServeHTTP(rec, req)
	var answer struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(rec.body.Bytes(), &answer); err != nil {
		t.Fatalf("%d %s: %v", rec.code, rec.body.String(), err)
	}
	if rec.code != http.StatusNotFound || answer.Error.Code != "not_found" || !strings.Contains(answer.Error.Message, httpjson.Echo(name)) {
		t.Errorf("unknown connector of 200 bytes: %d %s, want 404 not_found quoting %s", rec.code, rec.body.String(), httpjson.Echo(name))
	}
}

// The ingress read every body as plain bytes whatever its
// Content-Encoding. A Stripe event sent with `Content-Encoding: br` (plain bytes under a coding
// label, from a proxy that rewrites headers) was verified and stored as if the label were not
// there, and a body gzipped on the way was answered 401 invalid_signature (or, signed over the
// compressed bytes, 400 "invalid character '\x1f'"), which sends the integrator hunting for a
// wrong secret. docs/api.md: a Content-Encoding other than identity is a 415
// unsupported_media_type with Accept-Encoding: identity, never read as if it were plain. So it
// is here, before the body is read; identity is taken.
func TestContentEncodingIsRefusedNotReadAsPlain(t *testing.T) {
	now := time.Unix(1767225600, 0)
	h, cl := fakeIngress(t, now, 0)
	post := func(evt, encoding string) (*recorder, int) {
		t.Helper()
		body := paddedStripeEvent(evt, 0)
		req, err := http.NewRequest(http.MethodPost, "/v1/webhooks/stripe", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Stripe-Signature", stripeSignature(now, body))
		if encoding != "" {
			req.Header.Set("Content-Encoding", encoding)
		}
		before := storedEvents(cl)
		rec := newRecorder()
		h.ServeHTTP(rec, req)
		return rec, storedEvents(cl) - before
	}
	for _, encoding := range []string{"br", "gzip", "identity, gzip"} {
		rec, stored := post("evt_adv29_"+strings.ReplaceAll(encoding, ", ", "_"), encoding)
		if rec.code != http.StatusUnsupportedMediaType || !strings.Contains(rec.body.String(), `"unsupported_media_type"`) ||
			rec.header.Get("Accept-Encoding") != "identity" || stored != 0 {
			t.Errorf("Content-Encoding %s: %d %s (Accept-Encoding %q), %d stored; want 415 unsupported_media_type, Accept-Encoding: identity, nothing stored",
				encoding, rec.code, rec.body.String(), rec.header.Get("Accept-Encoding"), stored)
		}
	}
	if rec, stored := post("evt_adv29_identity", "identity"); rec.code != http.StatusOK || stored != 1 {
		t.Errorf("Content-Encoding identity: %d %s, %d stored; want 200 stored", rec.code, rec.body.String(), stored)
	}
}

func stripeSignature(at time.Time, body []byte) string {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(fakeStripeSecret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

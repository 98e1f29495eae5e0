package apiserver

// Host names no resolver can look up.

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// What broke: a task-creating POST whose video, face or webhook_url has a host name with an
// empty label ("cdn..example.com", ".hooks.example.com") or a label over 63 bytes was answered
// 202 and its price frozen; the task then failed fetching its video (refunded minutes later),
// or succeeded and was charged while every delivery of its webhook failed ("no such host").
// Input: one request, a typo or a URL built by joining parts with a dot twice; nothing races.
// Want: a 400 naming the field, nothing asked of the ledger (netguard's
// TestCheckURLRefusesHostNamesNoResolverCanLookUp has the fix's cases).
func TestAHostNameNoResolverCanLookUpIsA400NotATask(t *testing.T) {
	l := &accountLedger{available: 100}
	h, key, _ := unlimitedKeyedServer(t, l)
	for body, field := range map[string]string{
		`{"video":"https://cdn..example.com/v.mp4"}`:                                              `"video"`,
		`{"video":"https://` + strings.Repeat("a", 64) + `.example.com/v.mp4"}`:                   `"video"`,
		`{"video":"https://cdn.example.com/v.mp4","webhook_url":"https://.hooks.example.com/cb"}`: `"webhook_url"`,
		`{"template_id":"studio","face":"https://img..example.com/f.jpg"}`:                        `"face"`,
	} {
		path := "/v1/videos/eraser"
		if strings.Contains(body, "template_id") {
			path = "/v1/videos/short"
		}
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code, message := errorOf(t, rec)
		if rec.Code != http.StatusBadRequest || code != "invalid_request" || !strings.Contains(message, field) || !strings.Contains(message, "host name") {
			t.Errorf("POST %s %.70s: %d %s %q; want 400 invalid_request naming %s's host name", path, body, rec.Code, code, message, field)
		}
	}
	if l.creates != 0 {
		t.Errorf("the ledger was asked to create %d tasks; want none", l.creates)
	}
}

// The bearer cap on the REST API: an API key of ~1 MiB (net/http reads headers up to
// 1 MiB) was hashed and looked up as any key, and answered 401 invalid_api_key. Now a 400
// invalid_request in the envelope, saying why, before any lookup; nothing asked of the ledger.
func TestAnAPIKeyOverTheBearerCapIsA400(t *testing.T) {
	l := &accountLedger{available: 100}
	h, _, _ := unlimitedKeyedServer(t, l)
	req := httptest.NewRequest(http.MethodPost, "/v1/videos/eraser", strings.NewReader(`{"video":"https://cdn.example.com/v.mp4"}`))
	req.Header.Set("Authorization", "Bearer vg_"+strings.Repeat("k", 1<<20-4096))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	code, message := errorOf(t, rec)
	if rec.Code != http.StatusBadRequest || code != "invalid_request" || !strings.Contains(message, "bearer token") {
		t.Errorf("a 1 MiB API key: %d %s %q; want 400 invalid_request saying the bearer token is too long", rec.Code, code, message)
	}
	if l.creates != 0 {
		t.Errorf("the ledger was asked to create %d tasks; want none", l.creates)
	}
}

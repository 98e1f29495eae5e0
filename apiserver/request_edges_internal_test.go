package apiserver

// Data URLs spelt in capitals, empty
// bodies under every Content-Type.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// What breaks: a face sent as a data URL whose scheme or base64 token is not in lower case
// (`DATA:image/png;base64,…`, `Data:…`, `data:image/png;BASE64,…`) is refused with 400 "field
// "face": invalid image: not valid base64". RFC 3986 §3.1 makes schemes case-insensitive, and
// RFC 2397's grammar is ABNF, whose quoted strings (";base64") are case-insensitive too (RFC
// 5234 §2.3); the media type is case-insensitive by RFC 2045. docs/api.md promises a face "as
// base64, data: prefix optional", with no word about case.
//
// Input: one POST /v1/videos/short (or /v1/images/pose) whose face a client built with an
// upper-cased prefix (some languages' URL builders and hand-written SDKs upper-case schemes; a
// data URL copied from a tool that prints them so). Nothing races.
//
// What the user sees: a 400 that says its image is not valid base64, which it is; retrying
// changes nothing. Accepted, the face is stored and the task is created (202), as for
// `data:image/png;base64,`.
func TestADataURLFaceIsReadWhateverTheCaseOfItsSchemeAndBase64Token(t *testing.T) {
	face := pngFace(t)
	tmpl := studioTemplate()
	for _, prefix := range []string{"DATA:image/png;base64,", "Data:image/png;base64,", "data:IMAGE/PNG;BASE64,",
		"dAtA:image/png;Base64,", "data:image/png;base64,"} {
		c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tmpl).Build()
		l := &accountLedger{available: 100}
		blobs := &blobstore.Dir{Root: t.TempDir(), BaseURL: "http://apiserver.test/v1/blobs/"}
		s := New(Config{Client: c, APIReader: c, Ledger: l, Blobs: blobs, DefaultPrice: 10,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		req := httptest.NewRequest(http.MethodPost, "/v1/videos/short",
			strings.NewReader(`{"template_id":"studio","face":"`+prefix+face+`"}`))
		req.Header.Set("Content-Type", "application/json")
		rec := serveAs(s.createShort, "acct", req)
		if rec.Code != http.StatusAccepted {
			t.Errorf("face %s…: %d %s; want 202, as for data:image/png;base64,", prefix, rec.Code, rec.Body)
			continue
		}
		if l.creates != 1 {
			t.Errorf("face %s…: the ledger was asked to create %d tasks; want 1", prefix, l.creates)
		}
		if stored, err := os.ReadDir(blobs.Root); err != nil || len(stored) == 0 {
			t.Errorf("face %s…: nothing stored in the blob store (%v)", prefix, err)
		}
	}
}

// What breaks: `curl -d "" …/v1/videos/short` (or `-d @empty.json`, a body an SDK forgot to
// fill) sends an empty body labelled application/x-www-form-urlencoded, curl -d's default, and
// is answered 415 unsupported_media_type "a form (a=b&c=d) is not accepted: send Content-Type:
// application/json". The same empty body labelled application/json is a 400 "the body is empty;
// send a JSON object". The label of a body that is not there decides nothing: a client that
// follows the 415 (adds -H 'Content-Type: application/json') is then told the real problem.
//
// Decided: every endpoint that takes a body answers an empty one (no bytes, or only white
// space) with 400 invalid_request "the body is empty; send a JSON object", whatever its
// Content-Type (none, JSON, curl -d's form label, another media type, a charset not UTF-8)
// or Content-Encoding says: there is no content for a label to describe, and the fix the
// client needs is a body. A body that is there keeps the 415s (a real form, text/plain JSON,
// gzip). The POSTs that take no body still accept an empty one under any label.
//
// Input: one request; nothing races. What the user sees: a 415 about a form it never sent.
func TestAnEmptyBodyIsA400SayingSoUnderEveryContentType(t *testing.T) {
	l := &accountLedger{available: 100}
	h, key, c := unlimitedKeyedServer(t, l)
	do := func(method, target, ct, ce, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		if ce != "" {
			req.Header.Set("Content-Encoding", ce)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	created := do("POST", "/v1/short-templates", "application/json", "", `{"name":"a","target_url":"https://cdn.example/a.mp4"}`)
	var st struct {
		ID string `json:"id"`
	}
	if created.Code != http.StatusCreated || json.Unmarshal(created.Body.Bytes(), &st) != nil || st.ID == "" {
		t.Fatalf("creating a short template: %d %s", created.Code, created.Body)
	}
	targets := []struct{ method, target string }{
		{"POST", "/v1/videos/short"}, {"POST", "/v1/videos/eraser"}, {"POST", "/v1/videos/template"},
		{"POST", "/v1/images/pose"}, {"POST", "/v1/short-templates"}, {"PATCH", "/v1/short-templates/" + st.ID},
	}
	labels := []struct{ ct, ce string }{
		{"", ""}, {"application/json", ""}, {"application/json; charset=utf-8", ""},
		{"application/x-www-form-urlencoded", ""}, {"application/merge-patch+json", ""},
		{"text/plain", ""}, {"application/json; charset=utf-16", ""}, {"multipart/form-data; boundary=x", ""},
		{"application/json", "gzip"},
	}
	for _, tc := range targets {
		for _, lb := range labels {
			for _, body := range []string{"", " \r\n\t"} {
				rec := do(tc.method, tc.target, lb.ct, lb.ce, body)
				if rec.Code != http.StatusBadRequest {
					t.Errorf("%s %s, Content-Type %q, Content-Encoding %q, body %q: %d %s; want 400 the body is empty",
						tc.method, tc.target, lb.ct, lb.ce, body, rec.Code, rec.Body)
					continue
				}
				if code, msg := errorOf(t, rec); code != "invalid_request" || !strings.Contains(msg, "the body is empty") {
					t.Errorf("%s %s, Content-Type %q, body %q: %s %q", tc.method, tc.target, lb.ct, body, code, msg)
				}
			}
		}
	}
	// A body that is there keeps its 415s.
	for _, tc := range []struct{ ct, ce, body string }{
		{"application/x-www-form-urlencoded", "", "template_id=studio"},
		{"text/plain", "", `{"video":"https://cdn.example/v.mp4"}`},
		{"application/json", "gzip", "\x1f\x8b\x08\x00"},
	} {
		if rec := do("POST", "/v1/videos/eraser", tc.ct, tc.ce, tc.body); rec.Code != http.StatusUnsupportedMediaType {
			t.Errorf("eraser, Content-Type %q, Content-Encoding %q, body %q: %d %s; want 415", tc.ct, tc.ce, tc.body, rec.Code, rec.Body)
		}
	}
	// The POSTs that take no body take an empty one under any label.
	for _, ct := range []string{"", "application/x-www-form-urlencoded", "text/plain"} {
		if rec := do("POST", "/v1/tasks/vt-one/cancel", ct, "", ""); rec.Code != http.StatusAccepted {
			t.Errorf("cancel, Content-Type %q, no body: %d %s", ct, rec.Code, rec.Body)
		}
	}
	if l.creates != 0 {
		t.Errorf("the ledger was asked to create %d tasks", l.creates)
	}
	var sts videogenv1alpha1.ShortTemplateList
	if err := c.List(context.Background(), &sts, client.InNamespace("acct")); err != nil || len(sts.Items) != 1 || sts.Items[0].Spec.DisplayName != "a" {
		t.Errorf("short templates: %+v %v; want the one made, unchanged", sts.Items, err)
	}
}

// unlimitedKeyedServer is keyedServer without a rate limit, for tests that send many requests
// with the one key.
func unlimitedKeyedServer(t *testing.T, l Ledger) (http.Handler, string, client.Client) {
	t.Helper()
	tmpl := studioTemplate()
	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: "vt-one"},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityShort}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tmpl, task, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acct"}}).Build()
	key, _, err := apikeys.Issue(context.Background(), c, "videogen-system", "acct", "test")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Client: c, APIReader: c, Ledger: l, DefaultPrice: 10, RateLimit: rate.Inf,
		Keys:   &apikeys.Authenticator{Reader: c, Namespace: "videogen-system"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return s.Handler(), key, c
}

// What breaks: GET /v1/templates lists a short template that is being deleted (its deletion
// is held by a finalizer) as a usable custom template, while GET /v1/short-templates hides it
// and a task's template_id no longer resolves to it (catalog.FindShortTemplate skips it): the
// catalog offers {"id":"ushort_going","custom":true,"price":…} for a template every POST with
// that template_id answers "no template … is available".
//
// Interleaving: (1) the account creates a short template; (2) it is deleted (DELETE
// /v1/short-templates/{id}, or kubectl delete) while a finalizer holds it: any controller or
// tool of the cluster may add one (backup, policy and GitOps tools do; kubectl delete
// --cascade=foreground adds foregroundDeletion), and it stays until that finalizer's owner
// removes it; (3) the account's client lists GET /v1/templates and submits with the id.
//
// What the user sees: a template listed as available, then refused when used; its own
// short-templates listing says it is gone. Hidden, both listings agree with template_id.
func TestAShortTemplateBeingDeletedIsNotListedAsAUsableTemplate(t *testing.T) {
	const acct = "acct-22"
	short := func(name, id string) *videogenv1alpha1.ShortTemplate {
		return &videogenv1alpha1.ShortTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: acct, Name: name,
			Labels: map[string]string{videogenv1alpha1.LabelShortTemplateID: id}},
			Spec: videogenv1alpha1.ShortTemplateSpec{DisplayName: name, TargetURL: "https://cdn.example/" + name + ".mp4"}}
	}
	going := short("going", "ushort_going")
	going.Finalizers = []string{"backup.example.com/hold"}
	going.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	s, c := refusingServer(t, nil, going, short("staying", "ushort_staying"))
	if _, err := catalog.FindShortTemplate(context.Background(), c, acct, "ushort_going"); !errors.Is(err, catalog.ErrTemplateNotFound) {
		t.Fatalf("a task's template_id resolves ushort_going being deleted: %v", err)
	}
	for _, tc := range []struct {
		path string
		list func(http.ResponseWriter, *http.Request, apikeys.Principal)
	}{
		{"/v1/short-templates", s.listShortTemplates},
		{"/v1/templates", s.listTemplates},
		{"/v1/templates?capability=video.short", s.listTemplates},
	} {
		rec := serveAs(tc.list, acct, httptest.NewRequest(http.MethodGet, tc.path, nil))
		var page struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &page) != nil {
			t.Fatalf("GET %s: %d %s", tc.path, rec.Code, rec.Body)
		}
		var ids []string
		for _, d := range page.Data {
			ids = append(ids, d.ID)
		}
		if slices.Contains(ids, "ushort_going") || !slices.Contains(ids, "ushort_staying") {
			t.Errorf("GET %s lists %v; want ushort_staying and not ushort_going, which no task can use", tc.path, ids)
		}
	}
}

// What breaks: a revoked API key keeps working for as long as its Secret's deletion is held by
// a finalizer. Revoking deletes the Secret (videogenctl apikey revoke); Authenticate reads the
// Secret from the cache and checks its labels and hash, not whether it is being deleted, so
// every request with the key is served, and charged to the account, until the finalizer goes.
//
// Interleaving: (1) a key leaks; the administrator revokes it; (2) the Secret has a finalizer
// (a backup, secret-sync or policy tool that marks the Secrets of a namespace, or one added by
// hand), so the delete sets deletionTimestamp and the Secret stays; (3) whoever holds the key
// submits tasks. Each step is ordinary; the revoke answered success.
//
// What the user sees: "revoked" keys that still create tasks and spend points; the account's
// owner cannot stop them but by deleting the finalizer. Refused, the key is 401 invalid_api_key
// as soon as the replica's cache sees the deletion.
func TestARevokedKeyWhoseSecretAFinalizerHoldsIsRefused(t *testing.T) {
	l := &accountLedger{available: 100}
	h, key, c := unlimitedKeyedServer(t, l)
	ctx := context.Background()
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace("videogen-system")); err != nil || len(secrets.Items) != 1 {
		t.Fatalf("key secrets: %v %v", secrets.Items, err)
	}
	secret := &secrets.Items[0]
	secret.Finalizers = []string{"backup.example.com/hold"}
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if err := apikeys.Revoke(ctx, c, "videogen-system", secret.Labels[apikeys.LabelKeyID]); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, target, body string }{
		{"GET", "/v1/balance", ""},
		{"POST", "/v1/videos/short", `{"template_id":"studio","face":"https://cdn.example/face.png"}`},
	} {
		req := httptest.NewRequest(tc.method, tc.target, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("%s %s with a revoked key: %d %s; want 401", tc.method, tc.target, rec.Code, rec.Body)
			continue
		}
		if code, _ := errorOf(t, rec); code != "invalid_api_key" {
			t.Errorf("%s %s: code %s", tc.method, tc.target, code)
		}
	}
	if l.creates != 0 {
		t.Errorf("a revoked key created %d tasks", l.creates)
	}
}

// What breaks: a request with two Authorization headers is served as the first one's account
// and the second is ignored. Authorization is no list (RFC 9110 §11.6.2); RFC 6750 §3.1 answers
// a request that repeats the access token 400 invalid_request. A client that sends two keys of
// two accounts is charged on whichever came first, which it did not choose: curl sends both of
// two -H 'Authorization: …' (a script's default header plus the one it meant), as does Go's
// Header.Add over a client's default headers, or a gateway that adds its own.
//
// Input: one POST with Authorization: Bearer <key of account A> and Authorization: Bearer <key
// of account B>. Nothing races.
//
// What the user sees: 202, a task created and points frozen on account A, while the client
// believes it used B; B's listing does not show it. Refused, nothing is created and the 400
// says to send one Authorization header, as two Idempotency-Key headers are refused.
func TestTwoAuthorizationHeadersAreRefusedNotChargedToTheFirst(t *testing.T) {
	l := &accountLedger{available: 100}
	h, keyA, c := unlimitedKeyedServer(t, l)
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acct-b"}}); err != nil {
		t.Fatal(err)
	}
	keyB, _, err := apikeys.Issue(context.Background(), c, "videogen-system", "acct-b", "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, keys := range [][]string{{keyA, keyB}, {keyB, keyA}, {keyA, keyA}} {
		req := httptest.NewRequest(http.MethodPost, "/v1/videos/short",
			strings.NewReader(`{"template_id":"studio","face":"https://cdn.example/face.png"}`))
		req.Header.Set("Content-Type", "application/json")
		for _, k := range keys {
			req.Header.Add("Authorization", "Bearer "+k)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("two Authorization headers: %d %s; want 400", rec.Code, rec.Body)
			continue
		}
		if code, msg := errorOf(t, rec); code != "invalid_request" || !strings.Contains(msg, "Authorization") {
			t.Errorf("two Authorization headers: %s %q", code, msg)
		}
	}
	if l.creates != 0 {
		t.Errorf("the ledger was asked to create %d tasks", l.creates)
	}
}

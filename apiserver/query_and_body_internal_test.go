package apiserver

// Query strings on the endpoints that
// take none.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

// keyedServer is a whole Server (authentication, router, middleware) over one fake cluster
// holding an API key of account "acct", a short template "studio" and the account's task
// "vt-one"; it answers with the ledger l.
func keyedServer(t *testing.T, l Ledger) (http.Handler, string, client.Client) {
	t.Helper()
	tmpl := studioTemplate()
	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: "vt-one"},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityShort}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tmpl, task, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acct"}}).Build()
	key, _, err := apikeys.Issue(context.Background(), c, "videogen-system", "acct", "test")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Client: c, APIReader: c, Ledger: l, DefaultPrice: 10,
		Keys:   &apikeys.Authenticator{Reader: c, Namespace: "videogen-system"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return s.Handler(), key, c
}

// What breaks: every endpoint but the three lists ignores its query string. POST
// /v1/videos/short?dry_run=true creates the task and freezes its price (202), as does
// ?idempotency_key=K, a key the service never reads: each retry of that request is a new task
// charged again. POST /v1/tasks/{id}/cancel?force=true, DELETE /v1/short-templates/{id}?… and
// POST /v1/webhook-secret/rotate?dry_run=1 act in full. docs/api.md refuses an unknown query
// parameter on the lists ("not an answer … as if it were what was asked for") and an unknown
// body field everywhere; the endpoints that change things, where a parameter read as absent
// costs most, were the ones left open.
//
// Input: one request with a query parameter the endpoint does not take, as a client written
// against another video API (many take dry_run, or an idempotency key in the query), or a
// generated SDK that puts an option in the query, sends it. Nothing races.
//
// What the user sees: 202 and points frozen for a request it meant as a dry run; with
// ?idempotency_key=, a task and a charge per retry, where the header form would have replayed
// one. Refused, it gets a 400 naming the parameter and nothing changes.
func TestAQueryParameterAnEndpointDoesNotTakeIsRefusedAndChangesNothing(t *testing.T) {
	l := &accountLedger{available: 100}
	h, key, c := keyedServer(t, l)
	short := `{"template_id":"studio","face":"https://cdn.example/face.png"}`
	for _, tc := range []struct{ method, target, body string }{
		{"POST", "/v1/videos/short?dry_run=true", short},
		{"POST", "/v1/videos/short?idempotency_key=k-1", short},
		{"POST", "/v1/videos/eraser?dry_run=1", `{"video":"https://cdn.example/v.mp4"}`},
		{"POST", "/v1/videos/template?dry_run=1", `{"template_id":"studio","duration":5}`},
		{"POST", "/v1/images/pose?dry_run=1", `{"template_id":"studio","face":"https://cdn.example/face.png"}`},
		{"POST", "/v1/tasks/vt-one/cancel?force=true", ""},
		{"GET", "/v1/tasks/vt-one?expand=result", ""},
		{"GET", "/v1/balance?account=other", ""},
		{"GET", "/v1/webhook-secret?rotate=1", ""},
		{"POST", "/v1/webhook-secret/rotate?dry_run=1", ""},
		{"POST", "/v1/short-templates?dry_run=1", `{"name":"a","target_url":"https://cdn.example/a.mp4"}`},
		{"GET", "/v1/short-templates/ushort_x?x=1", ""},
		{"PATCH", "/v1/short-templates/ushort_x?dry_run=1", `{"name":"b"}`},
		{"DELETE", "/v1/short-templates/ushort_x?dry_run=1", ""},
	} {
		req := httptest.NewRequest(tc.method, tc.target, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+key)
		if tc.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s %s: %d %s; want 400 naming the unknown query parameter", tc.method, tc.target, rec.Code, rec.Body)
			continue
		}
		if code, msg := errorOf(t, rec); code != "invalid_request" || !strings.Contains(msg, "unknown query parameter") {
			t.Errorf("%s %s: %s %q", tc.method, tc.target, code, msg)
		}
	}
	if l.creates != 0 {
		t.Errorf("the ledger was asked to create %d tasks", l.creates)
	}
	var tasks videogenv1alpha1.VideoTaskList
	if err := c.List(context.Background(), &tasks, client.InNamespace("acct")); err != nil || len(tasks.Items) != 1 ||
		tasks.Items[0].Annotations[videogenv1alpha1.AnnotationCancelRequested] != "" {
		t.Errorf("tasks: %+v %v; want vt-one alone, not asked to cancel", tasks.Items, err)
	}
	var sts videogenv1alpha1.ShortTemplateList
	if err := c.List(context.Background(), &sts, client.InNamespace("acct")); err != nil || len(sts.Items) != 0 {
		t.Errorf("short templates: %+v %v", sts.Items, err)
	}

	// The lists still read theirs, and an empty query string is none.
	for _, target := range []string{"/v1/tasks?limit=1", "/v1/templates?capability=video.short", "/v1/balance?", "/v1/tasks/vt-one?&"} {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d %s", target, rec.Code, rec.Body)
		}
	}
}

// What breaks: a JSON body labelled Content-Type: application/json; charset=utf8 is refused
// with 415 "JSON bodies must be UTF-8, not charset=\"utf8\"": an answer that contradicts
// itself, for a body that is UTF-8. utf8 is a label of UTF-8 in the WHATWG Encoding Standard
// (what browsers and fetch read), and HTTP clients and frameworks send it (PHP and MySQL
// spell UTF-8 so; RFC 8259 gives JSON no charset parameter at all, which "has no effect on
// compliant recipients").
//
// Input: one POST with that header; nothing races.
//
// What the user sees: 415 telling it to send UTF-8, which it did; the request is refused
// however it is retried until the client's HTTP library is changed. Other charsets
// (utf-16, latin1) stay refused, as a body in them would be misread.
func TestAJSONBodyLabelledCharsetUTF8WithoutTheHyphenIsRead(t *testing.T) {
	l := &accountLedger{available: 100}
	h, key, _ := keyedServer(t, l)
	for _, tc := range []struct {
		ct     string
		status int
	}{
		{"application/json; charset=utf8", http.StatusAccepted},
		{"application/json; charset=UTF8", http.StatusAccepted},
		{`application/json;charset="utf8"`, http.StatusAccepted},
		{"application/json; charset=utf-16", http.StatusUnsupportedMediaType},
		{"application/json; charset=latin1", http.StatusUnsupportedMediaType},
		{"application/json; charset=us-ascii", http.StatusUnsupportedMediaType},
	} {
		req := httptest.NewRequest(http.MethodPost, "/v1/videos/short",
			strings.NewReader(`{"template_id":"studio","face":"https://cdn.example/face.png"}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", tc.ct)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("Content-Type %s: %d %s; want %d", tc.ct, rec.Code, rec.Body, tc.status)
		}
	}
}

// What breaks: POST /v1/webhook-secret/rotate and POST /v1/tasks/{id}/cancel never read their
// body, so one with options the service does not have is obeyed in full and answered 200/202:
// {"previous_expires_in":0} (or {"overlap":0}, {"revoke_previous":true}) rotates with the old
// secret signing alongside the new one for the whole 24 h overlap. Every endpoint that reads a
// body refuses an unknown field with 400; these two took anything.
//
// Input: one request, from a client that guesses the option (a leaked secret is exactly when
// one wants the old secret cut off at once) or a generated SDK sending its options; nothing
// races.
//
// What the user sees: 200 with the new secret and a previous_expires_at 24 h away, which a
// client that believes its option was taken does not read: the leaked secret goes on signing
// deliveries that its receivers accept. Refused, it learns there is no such option before
// anything changes. No body, or {}, stays accepted (every client today sends none).
func TestABodyOnAPOSTThatTakesNoneIsRefusedAndChangesNothing(t *testing.T) {
	l := &accountLedger{available: 100}
	tmpl := studioTemplate()
	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: "vt-one"},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityShort}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tmpl, task,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acct", UID: "uid-acct"}}).Build()
	key, _, err := apikeys.Issue(context.Background(), c, "videogen-system", "acct", "test")
	if err != nil {
		t.Fatal(err)
	}
	secrets := &webhooksecrets.Store{Client: c, Reader: c, Namespace: "videogen-system"}
	before, err := secrets.Ensure(context.Background(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	h := New(Config{Client: c, APIReader: c, Ledger: l, DefaultPrice: 10, WebhookSecrets: secrets,
		Keys:   &apikeys.Authenticator{Reader: c, Namespace: "videogen-system"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler()
	post := func(target, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, tc := range []struct{ target, body string }{
		{"/v1/webhook-secret/rotate", `{"previous_expires_in":0}`},
		{"/v1/webhook-secret/rotate", `[]`},
		{"/v1/tasks/vt-one/cancel", `{"refund":false}`},
		{"/v1/tasks/vt-one/cancel", `{"reason":"x"} trailing`},
	} {
		rec := post(tc.target, tc.body)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("POST %s %s: %d %s; want 400", tc.target, tc.body, rec.Code, rec.Body)
			continue
		}
		if code, msg := errorOf(t, rec); code != "invalid_request" || !strings.Contains(msg, "takes no body") {
			t.Errorf("POST %s %s: %s %q", tc.target, tc.body, code, msg)
		}
	}
	if after, err := secrets.Ensure(context.Background(), "acct"); err != nil || after.Current != before.Current {
		t.Errorf("the secret was rotated (%v)", err)
	}
	stored := &videogenv1alpha1.VideoTask{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(task), stored); err != nil ||
		stored.Annotations[videogenv1alpha1.AnnotationCancelRequested] != "" {
		t.Errorf("the task was asked to cancel: %v %v", stored.Annotations, err)
	}

	// Checked, holds with the fix: no body, white space and {} are none.
	for _, body := range []string{"", " \n", "{}"} {
		if rec := post("/v1/webhook-secret/rotate", body); rec.Code != http.StatusOK {
			t.Errorf("rotate with body %q: %d %s", body, rec.Code, rec.Body)
		}
	}
	if rec := post("/v1/tasks/vt-one/cancel", "{}"); rec.Code != http.StatusAccepted {
		t.Errorf("cancel with {}: %d %s", rec.Code, rec.Body)
	}
}

// createsTo is writesTo whose creates land in cluster too, as a cached client's do.
type createsTo struct{ writesTo }

func (c createsTo) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.cluster.Create(ctx, obj, opts...)
}

// What breaks: POST /v1/short-templates with an Idempotency-Key whose template was just
// deleted answers 200 Idempotent-Replayed with that template, which no longer exists, and
// creates nothing: the replay check reads only this replica's informer cache, which still
// holds the deleted template. docs/api.md keeps a key as long as its object, and a create with
// the key of a template being deleted answers 409 "retry shortly" and then creates it
// (catalog_test); the replay of a template that is gone is a third answer, and a false one.
//
// Interleaving: (1) the client created template T with key K (201); (2) it deletes T (DELETE
// /v1/short-templates/{id}: 204; a ShortTemplate has no finalizer, so it is gone at once);
// (3) right away it creates again with K and the same body (a client whose keys are derived
// from the template's content, so that a lost answer is retried safely, recreating a template
// it removed); the request reaches a replica whose informer has not seen the DELETE event yet
// (tens of ms ordinarily, seconds under load; with several replicas, a replica other than the
// one that served the DELETE). Each step is an ordinary client request.
//
// What the user sees: 200 with T's id; GET /v1/short-templates/{id} then 404 and a task with
// template_id T is a 400; the template it asked for does not exist and nothing says so.
// Reading around the cache before a cached replay is answered finds T gone, and the create
// goes ahead (201).
func TestAKeyedShortTemplateCreateAfterItsTemplateWasDeletedIsNotAReplayOfTheDeletedOne(t *testing.T) {
	body := `{"name":"Intro","target_url":"https://cdn.example.com/intro.mp4"}`
	var req shortTemplateRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	suffix := shortTemplateSuffix("acct", "tmpl-k")
	deleted := &videogenv1alpha1.ShortTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: "ushort-" + suffix,
			Labels:      map[string]string{videogenv1alpha1.LabelShortTemplateID: videogenv1alpha1.ShortTemplateIDPrefix + suffix},
			Annotations: map[string]string{AnnotationRequestHash: requestHash("/v1/short-templates", &req)}},
		Spec: videogenv1alpha1.ShortTemplateSpec{DisplayName: "Intro", TargetURL: "https://cdn.example.com/intro.mp4"},
	}
	sch := scheme.New()
	cluster := fake.NewClientBuilder().WithScheme(sch).Build() // (2) deleted
	cache := fake.NewClientBuilder().WithScheme(sch).WithObjects(deleted).Build()
	s := New(Config{Client: createsTo{writesTo{Client: cache, cluster: cluster}}, APIReader: cluster,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	r := httptest.NewRequest(http.MethodPost, "/v1/short-templates", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(HeaderIdempotencyKey, "tmpl-k")
	rec := serveAs(s.createShortTemplate, "acct", r)
	if rec.Code != http.StatusCreated || rec.Header().Get("Idempotent-Replayed") != "" {
		t.Errorf("create with the key of a deleted template: %d (replayed %q) %s; want 201, the template made again",
			rec.Code, rec.Header().Get("Idempotent-Replayed"), rec.Body)
	}
	var made videogenv1alpha1.ShortTemplateList
	if err := cluster.List(context.Background(), &made, client.InNamespace("acct")); err != nil || len(made.Items) != 1 {
		t.Errorf("templates in the cluster: %d %v; want the one asked for", len(made.Items), err)
	}
}

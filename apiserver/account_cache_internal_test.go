package apiserver

// A namespace deleted and made again under its name, for another tenant, while this replica's
// informer cache lags: the cache may still hold the deleted namespace's VideoTasks and
// ShortTemplates, which the kube-apiserver no longer has (a namespace is emptied before it
// goes). Two fake clients stand for one replica: cache is what its informers have seen so far
// (the Namespace and API key Secret included, as Authenticate reads them), cluster what the
// kube-apiserver holds (its APIReader, here counting its reads).

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/accountns"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// nsCreated is when the current namespace "acct" (tenant B's) was made.
var nsCreated = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// countingReader counts the reads around the cache.
type countingReader struct {
	client.Reader
	reads atomic.Int64
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.reads.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

func (c *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.reads.Add(1)
	return c.Reader.List(ctx, list, opts...)
}

// accountObject sets what tells whose an object is: its creation and, when recordedFor is
// not "", the account-uid annotation.
func accountObject(obj client.Object, name string, created time.Time, recordedFor string) client.Object {
	obj.SetNamespace("acct")
	obj.SetName(name)
	obj.SetUID(types.UID("uid-" + name))
	obj.SetCreationTimestamp(metav1.NewTime(created))
	if recordedFor != "" {
		obj.SetAnnotations(map[string]string{accountns.Annotation: recordedFor})
	}
	return obj
}

func cachedTask(name string, created time.Time, recordedFor string) client.Object {
	vt := &videogenv1alpha1.VideoTask{}
	vt.Spec.Capability = videogenv1alpha1.CapabilityShort
	vt.Status.Phase = videogenv1alpha1.TaskSucceeded
	vt.Status.Result = &videogenv1alpha1.TaskResult{URL: "https://cdn.example.com/" + name + ".mp4"}
	return accountObject(vt, name, created, recordedFor)
}

func cachedShortTemplate(id string, created time.Time, recordedFor string) client.Object {
	st := &videogenv1alpha1.ShortTemplate{Spec: videogenv1alpha1.ShortTemplateSpec{DisplayName: id,
		TargetURL: "https://cdn.example.com/" + id + ".mp4"}}
	st.Labels = map[string]string{videogenv1alpha1.LabelShortTemplateID: "ushort_" + id}
	st.Status.ID = "ushort_" + id
	return accountObject(st, "ushort-"+id, created, recordedFor)
}

// tenantReplica is a Server whose cache holds cached and whose kube-apiserver holds cluster,
// both with namespace acct (UID tenant-b, made at nsCreated) and the official template studio;
// it returns an API key of acct, its ledger and the counting reader around the cache.
func tenantReplica(t *testing.T, cached, cluster []client.Object) (http.Handler, string, *accountLedger, *countingReader) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acct", UID: "tenant-b", CreationTimestamp: metav1.NewTime(nsCreated)}}
	studio := &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: "studio", CreationTimestamp: metav1.NewTime(nsCreated.Add(-24 * time.Hour))},
		Spec: videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityShort, DisplayName: "Studio", MediaURL: "https://cdn.example.com/studio.mp4"}}
	sch := scheme.New()
	cache := fake.NewClientBuilder().WithScheme(sch).WithObjects(append(cached, ns, studio)...).Build()
	truth := fake.NewClientBuilder().WithScheme(sch).WithObjects(append(cluster, ns, studio)...).Build()
	key, _, err := apikeys.Issue(context.Background(), cache, "videogen-system", "acct", "test")
	if err != nil {
		t.Fatal(err)
	}
	around := &countingReader{Reader: truth}
	l := &accountLedger{available: 100}
	s := New(Config{Client: cache, APIReader: around, Ledger: l, DefaultPrice: 10,
		Keys:   &apikeys.Authenticator{Reader: cache, Namespace: "videogen-system"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return s.Handler(), key, l, around
}

// listedIDs is the ids of a list answer's data.
func listedIDs(t *testing.T, rec *httptest.ResponseRecorder) []string {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("list: %d %s; want 200", rec.Code, rec.Body)
	}
	var page struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, d := range page.Data {
		ids = append(ids, d.ID)
	}
	return ids
}

// Interleaving: 1. namespace acct (tenant A) has tasks and short templates. 2. acct is emptied
// and deleted; this replica's VideoTask and ShortTemplate watches fall behind. 3. a namespace
// acct is made for tenant B and a key issued for it (the Namespace and Secret caches have seen
// both). 4. B reads and submits by A's ids. B was shown A's tasks (their result URLs) and
// templates, and could render on A's template; now the cache's objects of the earlier acct (older
// than the namespace, or recorded for another UID) are read around the cache, where they are
// not, and B sees only its own.
func TestADeletedNamespacesCachedObjectsAreNotTheNewTenants(t *testing.T) {
	before, after := nsCreated.Add(-time.Hour), nsCreated.Add(time.Minute)
	own := []client.Object{cachedTask("vt-own", after, ""), cachedShortTemplate("own", after, "tenant-b")}
	stale := []client.Object{
		cachedTask("vt-older", before, ""), cachedTask("vt-recorded", after, "tenant-a"),
		cachedShortTemplate("older", before, ""), cachedShortTemplate("recorded", after, "tenant-a"),
	}
	h, key, l, _ := tenantReplica(t, append(stale, own...), own)

	for _, id := range []string{"vt-older", "vt-recorded"} {
		if rec := call(t, h, key, http.MethodGet, "/v1/tasks/"+id, ""); rec.Code != http.StatusNotFound {
			t.Errorf("GET /v1/tasks/%s of the deleted namespace: %d %s; want 404", id, rec.Code, rec.Body)
		}
	}
	if ids := listedIDs(t, call(t, h, key, http.MethodGet, "/v1/tasks", "")); !slices.Equal(ids, []string{"vt-own"}) {
		t.Errorf("GET /v1/tasks lists %v; want only [vt-own]", ids)
	}
	if ids := listedIDs(t, call(t, h, key, http.MethodGet, "/v1/short-templates", "")); !slices.Equal(ids, []string{"ushort_own"}) {
		t.Errorf("GET /v1/short-templates lists %v; want only [ushort_own]", ids)
	}
	if ids := listedIDs(t, call(t, h, key, http.MethodGet, "/v1/templates", "")); !slices.Equal(ids, []string{"studio", "ushort_own"}) {
		t.Errorf("GET /v1/templates lists %v; want [studio ushort_own]", ids)
	}
	for _, id := range []string{"ushort_older", "ushort_recorded"} {
		if rec := call(t, h, key, http.MethodGet, "/v1/short-templates/"+id, ""); rec.Code != http.StatusNotFound {
			t.Errorf("GET /v1/short-templates/%s of the deleted namespace: %d %s; want 404", id, rec.Code, rec.Body)
		}
		rec := call(t, h, key, http.MethodPost, "/v1/videos/short", `{"template_id":"`+id+`","face":"https://cdn.example.com/face.png"}`)
		if code, msg := errorOf(t, rec); rec.Code != http.StatusBadRequest || code != "invalid_request" ||
			!strings.Contains(msg, "no template") || l.creates != 0 {
			t.Errorf("POST /v1/videos/short on %s of the deleted namespace: %d %s (%d tasks created); want 400 invalid_request \"no template …\", nothing created or frozen",
				id, rec.Code, rec.Body, l.creates)
		}
	}
}

// The common path: what the cache holds of the current namespace (made for it by time, or
// recorded for its UID), and the official templates, are answered from the cache, with no
// read around it.
func TestTheCurrentNamespacesCachedObjectsAreServedFromTheCache(t *testing.T) {
	after := nsCreated.Add(time.Minute)
	own := []client.Object{cachedTask("vt-own", after, ""), cachedTask("vt-recorded", after, "tenant-b"),
		cachedShortTemplate("own", after, ""), cachedShortTemplate("recorded", nsCreated, "tenant-b")}
	h, key, l, around := tenantReplica(t, own, own)

	if rec := call(t, h, key, http.MethodGet, "/v1/tasks/vt-own", ""); rec.Code != http.StatusOK {
		t.Errorf("GET /v1/tasks/vt-own: %d %s; want 200", rec.Code, rec.Body)
	}
	if ids := listedIDs(t, call(t, h, key, http.MethodGet, "/v1/tasks", "")); !slices.Equal(ids, []string{"vt-recorded", "vt-own"}) {
		t.Errorf("GET /v1/tasks lists %v; want [vt-recorded vt-own]", ids)
	}
	if ids := listedIDs(t, call(t, h, key, http.MethodGet, "/v1/short-templates", "")); !slices.Equal(ids, []string{"ushort_recorded", "ushort_own"}) {
		t.Errorf("GET /v1/short-templates lists %v; want [ushort_recorded ushort_own]", ids)
	}
	if ids := listedIDs(t, call(t, h, key, http.MethodGet, "/v1/templates", "")); !slices.Equal(ids, []string{"studio", "ushort_recorded", "ushort_own"}) {
		t.Errorf("GET /v1/templates lists %v; want [studio ushort_recorded ushort_own]", ids)
	}
	if rec := call(t, h, key, http.MethodGet, "/v1/short-templates/ushort_own", ""); rec.Code != http.StatusOK {
		t.Errorf("GET /v1/short-templates/ushort_own: %d %s; want 200", rec.Code, rec.Body)
	}
	for _, id := range []string{"ushort_own", "ushort_recorded", "studio"} {
		rec := call(t, h, key, http.MethodPost, "/v1/videos/short", `{"template_id":"`+id+`","face":"https://cdn.example.com/face.png"}`)
		if rec.Code != http.StatusAccepted {
			t.Errorf("POST /v1/videos/short on %s: %d %s; want 202", id, rec.Code, rec.Body)
		}
	}
	if n := around.reads.Load(); n != 0 || l.creates != 3 {
		t.Errorf("%d reads around the cache, %d tasks created; want none, and 3", n, l.creates)
	}
}

package apiserver

// Idempotency-Key replays.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// countingLedger answers as the elected manager's books do for a name they hold: the task
// exists. It counts its calls.
type countingLedger struct{ calls int }

func (l *countingLedger) CreateTask(context.Context, *videogenv1alpha1.VideoTask, int64) (*videogenv1alpha1.VideoTask, error) {
	l.calls++
	return nil, ledger.ErrTaskExists
}

func (l *countingLedger) Balance(context.Context, string) (ledger.Figures, error) {
	l.calls++
	return ledger.Figures{}, nil
}

// the retry of a keyed request whose task exists is
// answered 400 "no template ... is available to this account" when the template was deleted
// (or its terms changed: a duration out of its new range is a 400 "duration" the same way)
// after the task was created and before the retry reached a replica whose cache has seen the
// task. Without an inline face, submit asked only the cache whether the key's task exists; on a
// miss it priced the request again, and the template's absence was answered before the ledger,
// which checks the task's name first, could say the task exists.
//
// Interleaving: 1. POST /v1/videos/short with Idempotency-Key K on replica A: the ledger creates
// the task (its price frozen), and A's answer is lost (A dies mid-rollout, the connection drops);
// 2. the template is deleted (an administrator retires an official template; for a ushort_
// template, the account's own DELETE); 3. the client retries the same request with K at once,
// through the Service, on replica B, whose informer has not delivered the task's create event
// yet (tens of ms ordinarily, seconds under load): cache miss, then the template is looked up
// in the cache and around it, and is gone. Every step is ordinary; docs/api.md promises "Same
// key and same body → 200 with the same task ... at any time while the task exists".
//
// What the user sees: 400 invalid_request, which says nothing was created and is not worth
// retrying; the task runs (or fails with template_unavailable, refunded) and a client that
// trusted the 400 never looks at it. Want: 200, Idempotent-Replayed, the task.
func TestAKeyedRetryWhoseTemplateWasDeletedSinceReplaysItsTask(t *testing.T) {
	const body = `{"template_id":"studio","face":"https://cdn.example.com/face.png"}`
	var req shortRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	// (1) the task the first attempt created; (2) its template, gone.
	made := &videogenv1alpha1.VideoTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: taskName("acct", "order-42"),
			Annotations: map[string]string{AnnotationRequestHash: requestHash("/v1/videos/short", &req)}},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityShort, TemplateRef: "studio",
			Inputs: videogenv1alpha1.TaskInputs{FaceImageURL: "https://cdn.example.com/face.png"}},
	}
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: videogenv1alpha1.PointAccountName}}
	sch := scheme.New()
	cluster := fake.NewClientBuilder().WithScheme(sch).WithObjects(acct, made).Build()
	cache := fake.NewClientBuilder().WithScheme(sch).WithObjects(acct).Build() // (3) has not seen the task
	l := &countingLedger{}
	s := New(Config{Client: cache, APIReader: cluster, Ledger: l, DefaultPrice: 10,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	r := httptest.NewRequest(http.MethodPost, "/v1/videos/short", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(HeaderIdempotencyKey, "order-42")
	rec := serveAs(s.createShort, "acct", r)
	if rec.Code != http.StatusOK || rec.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the keyed retry: %d (replayed %q) %s; want 200, the replay of task %s, which exists and holds its price",
			rec.Code, rec.Header().Get("Idempotent-Replayed"), rec.Body, made.Name)
	}
	var got struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.ID != made.Name {
		t.Errorf("answer %s: want task %s", rec.Body, made.Name)
	}

	// Another body with the key: 422, as for any reuse, not the template's 400 either.
	r = httptest.NewRequest(http.MethodPost, "/v1/videos/short", strings.NewReader(`{"template_id":"studio","face":"https://cdn.example.com/other.png"}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(HeaderIdempotencyKey, "order-42")
	if rec := serveAs(s.createShort, "acct", r); rec.Code != http.StatusUnprocessableEntity {
		t.Errorf("the key with another body: %d %s; want 422 idempotency_key_reused", rec.Code, rec.Body)
	}
	// Without a task of the key, the template's absence is the answer, as before.
	r = httptest.NewRequest(http.MethodPost, "/v1/videos/short", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(HeaderIdempotencyKey, "order-43")
	if rec := serveAs(s.createShort, "acct", r); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "template_id") {
		t.Errorf("a new key naming the deleted template: %d %s; want 400 naming template_id", rec.Code, rec.Body)
	}
	if l.calls != 0 {
		t.Errorf("%d ledger calls; want none", l.calls)
	}
}

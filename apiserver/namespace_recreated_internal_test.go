package apiserver

// What a namespace made again under a deleted one's name inherits.

import (
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
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// A keyed task's name is derived from the account's name and the key, so the next tenant of a
// deleted namespace's name who sends the same key and body meets the same name. A replica whose
// VideoTask cache still holds the old tenant's task (its watch behind the deletion) answered
// that request from the cache: 200 Idempotent-Replayed with the old tenant's task and its
// result, and nothing created or charged. The kube-apiserver holds no such task: the request is
// a new one.
func TestAKeyedRequestIsNotReplayedFromACachedTaskTheClusterNoLongerHas(t *testing.T) {
	const body = `{"template_id":"studio","face":"https://cdn.example/face.png"}`
	var req shortRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	oldTenants := &videogenv1alpha1.VideoTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: taskName("acct", "order-1"), UID: "old-tenant",
			Annotations: map[string]string{AnnotationRequestHash: requestHash("/v1/videos/short", &req)}},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityShort, TemplateRef: "studio",
			Inputs: videogenv1alpha1.TaskInputs{FaceImageURL: "https://cdn.example/face.png"}},
	}
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: videogenv1alpha1.PointAccountName}}
	tmpl := studioTemplate()
	sch := scheme.New()
	cluster := fake.NewClientBuilder().WithScheme(sch).WithObjects(acct, tmpl).Build()
	cache := fake.NewClientBuilder().WithScheme(sch).WithObjects(acct, tmpl, oldTenants).Build()
	l := &accountLedger{available: 100}
	s := New(Config{Client: cache, APIReader: cluster, Ledger: l, DefaultPrice: 10,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	r := httptest.NewRequest(http.MethodPost, "/v1/videos/short", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(HeaderIdempotencyKey, "order-1")
	rec := serveAs(s.createShort, "acct", r)
	if rec.Code != http.StatusAccepted || rec.Header().Get("Idempotent-Replayed") != "" || l.creates != 1 {
		t.Fatalf("the new tenant's request: %d (replayed %q, %d creates) %s; want 202, its own task created and charged",
			rec.Code, rec.Header().Get("Idempotent-Replayed"), l.creates, rec.Body)
	}
}

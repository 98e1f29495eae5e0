package apiserver

// Pricing at the REST apiserver.

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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// pricedLedger records the price of every create it is asked for.
type pricedLedger struct {
	available int64
	prices    []int64
}

func (l *pricedLedger) CreateTask(_ context.Context, task *videogenv1alpha1.VideoTask, price int64) (*videogenv1alpha1.VideoTask, error) {
	l.prices = append(l.prices, price)
	if l.available < price {
		return nil, &ledger.InsufficientBalanceError{Required: price, Available: l.available}
	}
	return task, nil
}

func (l *pricedLedger) Balance(context.Context, string) (ledger.Figures, error) {
	return ledger.Figures{Balance: l.available}, nil
}

// pricingServer is a whole Server over a fake cluster holding an API key of account "acct"
// and the templates given, with the default price 10.
func pricingServer(t *testing.T, l Ledger, templates ...*videogenv1alpha1.Template) (http.Handler, string) {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acct"}})
	for _, tmpl := range templates {
		b = b.WithObjects(tmpl)
	}
	c := b.Build()
	key, _, err := apikeys.Issue(context.Background(), c, "videogen-system", "acct", "test")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Client: c, APIReader: c, Ledger: l, DefaultPrice: 10,
		Keys:   &apikeys.Authenticator{Reader: c, Namespace: "videogen-system"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return s.Handler(), key
}

func call(t *testing.T, h http.Handler, key, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// What breaks: GET /v1/templates?capability=video.eraser lists an official video.eraser
// Template at its own price ("price": 3), yet POST /v1/videos/eraser takes no template_id (an
// unknown field is refused) and charges every eraser task the system default price (10):
// the listing offers a price no request can get. docs/api.md says default_price is "what a
// video.eraser task costs (it has no template)"; the schema allows video.eraser Templates
// (mediaURL is not required for them) and the controller prices a kubectl task's eraser
// templateRef by it, so such a Template is a kubectl-only thing the REST catalog shows as if
// a client could order it.
//
// Input: a platform administrator creates a video.eraser Template with a price (the schema
// takes it; kubectl users get that price); a REST client lists the eraser catalog, picks the
// cheap template, and submits an eraser task. Nothing races.
//
// What the user sees: a catalog entry at 3 points, and a task charged 10 (or a 402 when its
// balance is between the two), with no way to ask for the listed template.
func TestAnEraserTemplateIsNotListedAtAPriceNoRESTEraserTaskIsCharged(t *testing.T) {
	wipe := &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: "wipe"},
		Spec: videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityEraser, DisplayName: "Wipe", Price: ptr.To[int64](3)}}
	l := &pricedLedger{available: 100}
	h, key := pricingServer(t, l, wipe)

	rec := call(t, h, key, "GET", "/v1/templates?capability=video.eraser", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /v1/templates: %d %s", rec.Code, rec.Body)
	}
	var listing struct {
		Data         []TemplateView `json:"data"`
		DefaultPrice int64          `json:"default_price"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &listing); err != nil {
		t.Fatal(err)
	}
	rec = call(t, h, key, "POST", "/v1/videos/eraser", `{"video":"https://cdn.example/v.mp4"}`)
	if rec.Code != http.StatusAccepted || len(l.prices) != 1 {
		t.Fatalf("POST /v1/videos/eraser: %d %s, prices %v", rec.Code, rec.Body, l.prices)
	}
	charged := l.prices[0]
	for _, v := range listing.Data {
		if v.Price != charged {
			t.Errorf("the eraser catalog lists %q at %d points, but an eraser task is charged %d (default_price %d) and cannot name a template",
				v.ID, v.Price, charged, listing.DefaultPrice)
		}
	}
	// Nor can a client ask for it.
	rec = call(t, h, key, "POST", "/v1/videos/eraser", `{"video":"https://cdn.example/v.mp4","template_id":"wipe"}`)
	if rec.Code != http.StatusBadRequest {
		t.Errorf("an eraser task naming the template: %d %s", rec.Code, rec.Body)
	}
}

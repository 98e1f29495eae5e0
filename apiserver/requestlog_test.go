package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// brokenLedger fails as nothing the REST API expects: a fault of the server's.
type brokenLedger struct{}

func (brokenLedger) CreateTask(context.Context, *videogenv1alpha1.VideoTask, int64) (*videogenv1alpha1.VideoTask, error) {
	return nil, errors.New("the ledger answered 500 Internal Server Error: boom")
}

func (brokenLedger) Balance(context.Context, string) (ledger.Figures, error) {
	return ledger.Figures{}, errors.New("the ledger answered 500 Internal Server Error: boom")
}

// electingLedger answers as the ledger does while no manager is elected (or none listens).
type electingLedger struct{}

func (electingLedger) CreateTask(context.Context, *videogenv1alpha1.VideoTask, int64) (*videogenv1alpha1.VideoTask, error) {
	return nil, ledger.ErrNotReady
}

func (electingLedger) Balance(context.Context, string) (ledger.Figures, error) {
	return ledger.Figures{}, ledger.ErrNotReady
}

// ledgerFacing is a REST apiserver in front of l, for the tests of what it logs and counts of
// the ledger's answers; get asks GET /v1/balance with a valid key.
type ledgerFacing struct {
	srv  *apiserver.Server
	key  string
	logs bytes.Buffer
}

func newLedgerFacing(t *testing.T, l apiserver.Ledger, reg prometheus.Registerer) *ledgerFacing {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acct"}}).Build()
	key, _, err := apikeys.Issue(context.Background(), c, "videogen-system", "acct", "test")
	if err != nil {
		t.Fatal(err)
	}
	f := &ledgerFacing{key: key}
	f.srv = apiserver.New(apiserver.Config{Client: c, APIReader: c, Ledger: l, Registerer: reg,
		Keys: &apikeys.Authenticator{Reader: c, Namespace: "videogen-system"}, Logger: slog.New(slog.NewJSONHandler(&f.logs, nil))})
	return f
}

// requestLine is the log's "request" line, the one the request logger writes for each answer.
func (f *ledgerFacing) requestLine(t *testing.T) map[string]any {
	t.Helper()
	for _, raw := range bytes.Split(bytes.TrimSpace(f.logs.Bytes()), []byte("\n")) {
		var line map[string]any
		if err := json.Unmarshal(raw, &line); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		if line["msg"] == "request" {
			return line
		}
	}
	t.Fatalf("no request line: %s", f.logs.String())
	return nil
}

func (f *ledgerFacing) balance() *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/v1/balance", nil)
	req.Header.Set("Authorization", "Bearer "+f.key)
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, req)
	return rec
}

// The request's log line says which error it answered: during a manager outage every task POST
// and balance answers 503, and the on-call reading the apiserver's log (as the VideogenAPIErrors
// alert tells them to) must see that the ledger was the cause, not only "status":503.
func TestTheRequestLogLineNamesTheError(t *testing.T) {
	f := newLedgerFacing(t, electingLedger{}, nil)
	logs := &f.logs
	rec := f.balance()
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503: %s", rec.Code, rec.Body)
	}
	line := f.requestLine(t)
	if line["status"] != float64(503) {
		t.Fatalf("not the request's line: %s", logs.String())
	}
	if line["error_code"] != "service_unavailable" || line["error_message"] != "the service is electing its points ledger; retry shortly" {
		t.Errorf("the log line does not say which 503 it was: %s", logs.String())
	}
	// Temporary, and the client is told to retry: not an error of the server's.
	if line["level"] != "WARN" {
		t.Errorf("a 503 service_unavailable logged at %v, want WARN: %s", line["level"], logs.String())
	}

	// A successful answer carries no error fields.
	logs.Reset()
	rec = httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if bytes.Contains(logs.Bytes(), []byte("error_code")) {
		t.Errorf("a 200 logged an error: %s", logs.String())
	}
}

// A 500 is a fault of the server's and stays an error in the log, as the internal error's own line.
func TestA500IsLoggedAsAnError(t *testing.T) {
	f := newLedgerFacing(t, brokenLedger{}, nil)
	logs := &f.logs
	rec := f.balance()
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500: %s", rec.Code, rec.Body)
	}
	if line := f.requestLine(t); line["level"] != "ERROR" || line["status"] != float64(500) {
		t.Errorf("a 500's request line: level %v, status %v, want ERROR, 500: %s", line["level"], line["status"], logs.String())
	}
}

// The apiserver exports its calls to the ledger on its Registerer: the series of every outcome
// from the start (so rate() sees a replica's first failure), and each call under its outcome.
func TestLedgerCallsAreExported(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newLedgerFacing(t, electingLedger{}, reg)
	calls := func() map[string]float64 {
		got := map[string]float64{}
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "videogen_api_ledger_calls_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				var op, outcome string
				for _, l := range m.GetLabel() {
					switch l.GetName() {
					case "operation":
						op = l.GetValue()
					case "outcome":
						outcome = l.GetValue()
					}
				}
				got[op+"/"+outcome] = m.GetCounter().GetValue()
			}
		}
		return got
	}
	before := calls()
	for _, series := range []string{"balance/ok", "balance/unavailable", "balance/no_answer", "create_task/ok", "create_task/refused", "create_task/unavailable", "create_task/no_answer"} {
		if v, ok := before[series]; !ok || v != 0 {
			t.Errorf("before any call, videogen_api_ledger_calls_total %s = %v (exported: %v), want 0", series, v, ok)
		}
	}
	for range 2 {
		f.balance()
	}
	if got := calls()["balance/unavailable"]; got != 2 {
		t.Errorf("after two balances answered 503, videogen_api_ledger_calls_total balance/unavailable = %v, want 2 (%v)", got, calls())
	}
}

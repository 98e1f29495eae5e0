package apiserver_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// waitingLedger answers as a ledger.Client does while no manager answers, until its caller
// gives up: with the caller's context error.
type waitingLedger struct{}

func (waitingLedger) CreateTask(ctx context.Context, _ *videogenv1alpha1.VideoTask, _ int64) (*videogenv1alpha1.VideoTask, error) {
	<-ctx.Done()
	return nil, fmt.Errorf("asking the ledger: %w", ctx.Err())
}

func (waitingLedger) Balance(ctx context.Context, _ string) (ledger.Figures, error) {
	<-ctx.Done()
	return ledger.Figures{}, fmt.Errorf("asking the ledger: %w", ctx.Err())
}

// A client that hangs up while its request waits for the points ledger (curl -m 2 during a
// manager outage in make run) was counted as a 500 in videogen_api_requests_total, which
// VideogenAPIErrors reads as the server failing, and logged at ERROR twice ("internal error …
// asking the ledger: context canceled"), though nobody got an answer and the ledger's own
// counter said canceled. It is 499, nginx's "client closed request", logged at INFO.
func TestAClientThatHungUpIsNoServerError(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newLedgerFacing(t, waitingLedger{}, reg)
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/balance", ""},
		{http.MethodPost, "/v1/videos/eraser", `{"video":"https://media.example.com/v.mp4"}`},
	} {
		f.logs.Reset()
		gone, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequestWithContext(gone, c.method, c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+f.key)
		rec := httptest.NewRecorder()
		f.srv.Handler().ServeHTTP(rec, req)
		if bytes.Contains(f.logs.Bytes(), []byte(`"level":"ERROR"`)) {
			t.Errorf("%s %s: a client that hung up was logged as an error:\n%s", c.method, c.path, f.logs.String())
		}
		if line := f.requestLine(t); line["status"] != float64(499) {
			t.Errorf("%s %s: request line status %v, want 499: %s", c.method, c.path, line["status"], f.logs.String())
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != "videogen_api_requests_total" {
			continue
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && strings.HasPrefix(l.GetValue(), "5") {
					t.Errorf("videogen_api_requests_total counts a client that hung up as %s", m.String())
				}
			}
		}
	}
}

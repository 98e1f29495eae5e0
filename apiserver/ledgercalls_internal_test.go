package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/util/wait"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// Each answer of the ledger, as a ledger.Client gets it over HTTP, is counted under the outcome
// the dashboard and the alerts read: a business refusal is the ledger working, and unavailable
// and no_answer say that no manager serves it.
func TestLedgerCallsAreCountedByOutcome(t *testing.T) {
	answer := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}
	}
	hang := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // nothing listens at its address

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	task := &videogenv1alpha1.VideoTask{}
	task.Namespace, task.Name = "acct", "t1"

	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc // nil: nothing listens
		ctx     context.Context
		create  bool
		want    string
	}{
		{"balance answered", answer(200, `{"balance":5}`), nil, false, "ok"},
		{"task created", answer(201, `{"metadata":{"name":"t1","namespace":"acct"}}`), nil, true, "ok"},
		{"insufficient balance", answer(402, `{"error":{"code":"insufficient_balance","message":"short","required":10,"available":1}}`), nil, true, "refused"},
		{"no account", answer(404, `{"error":{"code":"account_not_found","message":"none"}}`), nil, false, "refused"},
		{"task exists", answer(409, `{"error":{"code":"task_exists","message":"exists"}}`), nil, true, "refused"},
		{"not elected", answer(503, `{"error":{"code":"not_ready","message":"not the elected manager"}}`), nil, false, "unavailable"},
		{"nobody listens", nil, nil, true, "unavailable"},
		{"manager hangs", hang, nil, false, "no_answer"},
		{"client went away", answer(200, `{}`), canceled, false, "canceled"},
		{"token refused", answer(401, `Unauthorized`), nil, false, "error"},
		{"ledger fault", answer(500, `{"error":{"code":"internal_error","message":"boom"}}`), nil, true, "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := gone.URL
			if tc.handler != nil {
				hs := httptest.NewServer(tc.handler)
				defer hs.Close()
				url = hs.URL
			}
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			// A short deadline ends the hang; the other cases are answered at once (Steps end
			// them), and a deadline a loaded machine meets would count them no_answer.
			deadline := time.Minute
			if tc.want == "no_answer" {
				deadline = 300 * time.Millisecond
			}
			calls := newLedgerCalls()
			l := countedLedger{calls: calls, next: &ledger.Client{URL: url, Deadline: deadline,
				Backoff: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 3}}}
			op := "balance"
			if tc.create {
				op = "create_task"
				_, _ = l.CreateTask(ctx, task, 10)
			} else {
				_, _ = l.Balance(ctx, "acct")
			}
			for _, outcome := range ledgerOutcomes {
				want := 0.0
				if outcome == tc.want {
					want = 1
				}
				if got := counterValue(t, calls.WithLabelValues(op, outcome)); got != want {
					t.Errorf("videogen_api_ledger_calls_total{operation=%q,outcome=%q} = %v, want %v", op, outcome, got, want)
				}
			}
		})
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

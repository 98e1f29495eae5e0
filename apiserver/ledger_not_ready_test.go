package apiserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// The 503 a replica answers when the ledger's not_ready outlasts the
// call's deadline said "the service is electing its points ledger" whatever the cause, though
// the elected manager answers not_ready for reasons of one account's while it keeps the books:
// an account created seconds ago whose Add has not reached the manager's informer (GET
// /v1/balance, POST /v1/tasks: noAccount read it), a suspension lifted that the informer has
// not brought yet (acceptingNow: the kube-apiserver no longer confirms it), the account's
// books being rebuilt (a new or replaced account), and a 429 of the kube-apiserver (shed).
// Each is ordinary: a watch a few seconds behind under load (a relist of many tasks), an
// administrator's kubectl patch, a priority-and-fairness 429. A watch that lags past the
// client's 15 s deadline makes the 503 the customer's answer. What the customer and the
// on-call saw: "electing its points ledger" (a manager failover) while a manager was elected
// and served every other account: the on-call looks for a failover that is not there, and
// the customer (who just had the account created or the suspension lifted) is told of an
// outage instead of a delay with the account. Want: the ledger says why (the error body's
// reason, kept by ledger.Client), and the replica's message says what is true for each cause;
// no manager listening, or one that is not elected, is still "electing".
func TestTheNotReadyMessageSaysWhatIsTrue(t *testing.T) {
	for _, c := range []struct {
		name   string
		body   string // the ledger's not_ready answer (empty: no manager listens)
		want   string
		reject string
	}{
		{"no manager listens", "", "electing its points ledger", ""},
		{"a manager that is not elected (or still building every account's books)",
			`{"error":{"code":"not_ready","message":"the ledger is not ready","reason":"electing"}}`, "electing its points ledger", ""},
		{"an account the elected manager's informer has not brought yet",
			`{"error":{"code":"not_ready","message":"the ledger is not ready","reason":"account"}}`, "catching up with a change to this account", "electing"},
		{"a kube-apiserver that shed the ledger's request (429)",
			`{"error":{"code":"not_ready","message":"the server has received too many requests","reason":"busy"}}`, "busy", "electing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := "http://127.0.0.1:1" // nothing listens
			if c.body != "" {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusServiceUnavailable)
					_, _ = w.Write([]byte(c.body))
				}))
				defer srv.Close()
				url = srv.URL
			}
			// Steps end the call: every attempt is answered at once. The deadline is no part of
			// what is tested; a short one cuts an attempt of a loaded machine short, which is
			// "did not answer in time" (or, unsent, "electing"), not the ledger's reason.
			cl := &ledger.Client{URL: url, Deadline: time.Minute,
				Backoff: wait.Backoff{Duration: 5 * time.Millisecond, Factor: 1, Steps: 3}}
			f := newLedgerFacing(t, cl, nil)
			rec := f.balance()
			var body struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			if rec.Code != http.StatusServiceUnavailable || body.Error.Code != "service_unavailable" {
				t.Fatalf("%d %s, want 503 service_unavailable", rec.Code, rec.Body)
			}
			if !strings.Contains(body.Error.Message, c.want) || (c.reject != "" && strings.Contains(body.Error.Message, c.reject)) {
				t.Errorf("the 503 says %q; want it to say %q", body.Error.Message, c.want)
			}
		})
	}
}

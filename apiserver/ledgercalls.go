package apiserver

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// Outcomes of a call to the points ledger, as values of videogen_api_ledger_calls_total's
// outcome label. A call is one Ledger method call: a ledger.Client retries within it while no
// manager answers as the elected one (up to ledger.DefaultDeadline), so a failover of a few
// seconds shows as slow calls, not failed ones.
const (
	// ledgerOK: the ledger answered what was asked.
	ledgerOK = "ok"
	// ledgerRefused: the ledger answered with a refusal of the account's (insufficient
	// balance, no account, suspended, closing), a task that exists, or a create the
	// kube-apiserver refused (ledger.RefusedError: a quota): the ledger works.
	ledgerRefused = "refused"
	// ledgerUnavailable: the ledger was not ready for the whole call (ledger.ErrNotReady): no
	// manager said it is the elected one, or none listened (the 503 "electing its points
	// ledger"), or the elected one waited for the account's latest change (notReadyMessage).
	ledgerUnavailable = "unavailable"
	// ledgerNoAnswer: a manager took a call and did not answer it (ledger.ErrNoAnswer): a hung
	// manager, or one that died with the call open.
	ledgerNoAnswer = "no_answer"
	// ledgerCanceled: the client went away before the ledger answered.
	ledgerCanceled = "canceled"
	// ledgerError: anything else, such as a status the client does not expect (a 401 or 403
	// for a token the manager does not accept) or a 500 of the ledger.
	ledgerError = "error"
)

var (
	ledgerOperations = []string{"create_task", "balance"}
	ledgerOutcomes   = []string{ledgerOK, ledgerRefused, ledgerUnavailable, ledgerNoAnswer, ledgerCanceled, ledgerError}
)

func newLedgerCalls() *prometheus.CounterVec {
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "videogen_api_ledger_calls_total",
		Help: "Calls of the REST apiserver to the points ledger in the elected manager, by operation (create_task, balance) and outcome: ok, refused (the account's refusal, such as insufficient balance), unavailable (no elected manager answered), no_answer (a manager did not answer in time), canceled (the client went away), error.",
	}, []string{"operation", "outcome"})
	// Every series from the start, at 0: rate() sees a replica's first failure.
	for _, op := range ledgerOperations {
		for _, outcome := range ledgerOutcomes {
			calls.WithLabelValues(op, outcome)
		}
	}
	return calls
}

// ledgerOutcome classifies the error of a ledger call made with ctx.
func ledgerOutcome(ctx context.Context, err error) string {
	var short *ledger.InsufficientBalanceError
	var refused *ledger.RefusedError
	switch {
	case err == nil:
		return ledgerOK
	case errors.Is(err, ledger.ErrNoAnswer):
		return ledgerNoAnswer // also a name taken by the call's own attempt in doubt
	case errors.As(err, &short), errors.Is(err, ledger.ErrAccountNotFound), errors.Is(err, ledger.ErrAccountSuspended),
		errors.Is(err, ledger.ErrAccountClosing), errors.Is(err, ledger.ErrTaskExists), errors.As(err, &refused):
		return ledgerRefused
	case errors.Is(err, ledger.ErrNotReady):
		return ledgerUnavailable
	case ctx.Err() != nil:
		return ledgerCanceled
	default:
		return ledgerError
	}
}

// countedLedger counts the calls to the ledger it passes on, by outcome; it changes none.
type countedLedger struct {
	next  Ledger
	calls *prometheus.CounterVec
}

func (l countedLedger) CreateTask(ctx context.Context, task *videogenv1alpha1.VideoTask, price int64) (*videogenv1alpha1.VideoTask, error) {
	created, err := l.next.CreateTask(ctx, task, price)
	l.calls.WithLabelValues("create_task", ledgerOutcome(ctx, err)).Inc()
	return created, err
}

func (l countedLedger) Balance(ctx context.Context, namespace string) (ledger.Figures, error) {
	f, err := l.next.Balance(ctx, namespace)
	l.calls.WithLabelValues("balance", ledgerOutcome(ctx, err)).Inc()
	return f, err
}

// notReadyMessage is the 503's message for a ledger that was not ready for the whole call,
// saying why (ledger.NotReadyReason): an elected manager waiting for one account's change is
// no election.
func notReadyMessage(err error) string {
	switch ledger.NotReadyReason(err) {
	case ledger.NotReadyAccount:
		return "the points ledger is catching up with a change to this account (created, or its suspension lifted, moments ago); retry shortly"
	case ledger.NotReadyBusy:
		return "the points ledger is busy; retry shortly"
	}
	return "the service is electing its points ledger; retry shortly"
}

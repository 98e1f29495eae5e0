package ledger

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// The ledger Client retries a create whose
// attempt went out and got no answer (the manager took it and died, or the connection to it
// was cut), and a later attempt's refusal (402 insufficient_balance, 403 create_refused, 403
// account_suspended) was returned as the call's answer: the doubt of the first attempt was
// dropped. The REST apiserver then answers the client 402 ("ask for a top-up") or 403, which
// say nothing was created, while the first attempt's task exists and holds its price.
//
// Interleaving (a failover with a create in flight): 1. the replica sends the create to the
// elected manager A, which admits it (freeze) and sends the kube create; 2. A loses its Lease
// and exits before it answers: the connection closes unanswered (doubt); 3. B is elected and
// builds its books from a list made before A's create lands (a deposed manager's late create,
// docs/ledger.md), and admits another request of the account, which takes the balance; 4. A's
// create lands; B's informer has not delivered its event yet; 5. the replica's retry reaches
// B: the name is not in B's books, and the balance is short: 402. (Or the ResourceQuota's last
// slot is the landed task's, and the kube-apiserver refuses B's create with 403 before it
// finds the name taken: create_refused.) The same happens without a failover when A's create
// is cut by the replica's 10 s timeout and lands after A's re-read found nothing.
//
// What the user sees: a keyless client is told 402 insufficient_balance (or 403), believes no
// task was made, and the task runs and is charged; a keyed one is told its key is free. The
// answer must stay in doubt (ErrNoAnswer: 503 "retry with the same Idempotency-Key", or "the
// task may have been created"), whatever later attempts were refused.
func TestARefusalAfterAnAttemptInDoubtKeepsTheCallInDoubt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refuse  func(http.ResponseWriter)
		refusal func(error) bool
	}{
		{"insufficient balance", func(w http.ResponseWriter) {
			writeError(w, http.StatusPaymentRequired, codeInsufficientBalance, "short", &InsufficientBalanceError{Required: 10, Available: 0})
		}, func(err error) bool { var short *InsufficientBalanceError; return errors.As(err, &short) }},
		{"quota used up", func(w http.ResponseWriter) {
			writeError(w, http.StatusForbidden, codeCreateRefused, "exceeded quota", nil)
		}, func(err error) bool { var refused *RefusedError; return errors.As(err, &refused) }},
		{"account suspended", func(w http.ResponseWriter) {
			writeError(w, http.StatusForbidden, codeAccountSuspended, "suspended", nil)
		}, func(err error) bool { return errors.Is(err, ErrAccountSuspended) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) > 1 {
					tc.refuse(w) // B, whose books do not count the first attempt's task yet
					return
				}
				// A took the create and died before it answered.
				conn, _, err := w.(http.Hijacker).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				_ = conn.Close()
			}))
			defer srv.Close()
			c := &Client{URL: srv.URL, Deadline: 5 * time.Second,
				Backoff: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 5}}
			_, err := c.CreateTask(context.Background(), taskNamed("team", "t"), 10)
			if calls.Load() != 2 {
				t.Fatalf("%d attempts, want 2", calls.Load())
			}
			if !errors.Is(err, ErrNoAnswer) || tc.refusal(err) {
				t.Errorf("the first attempt went out unanswered, the second was refused: %v;\n"+
					"want ErrNoAnswer (the first may have landed), not the refusal (the REST apiserver's 402/403: nothing was created)", err)
			}
		})
	}
}

// A control-plane outage (etcd frozen): the first attempt's create waits on the kube-apiserver
// past the replica's per-attempt timeout; the retry finds that create's name taken (409
// task_exists). The call is both: ErrTaskExists (a read may find the task: the replay) and
// ErrNoAnswer (the name is most likely this call's own create, still on its way: not another
// request's, so no "Idempotency-Key in use"). Without the earlier attempt in doubt, a 409 is
// ErrTaskExists alone: a request with the key won a race.
func TestANameTakenAfterAnAttemptInDoubtIsInDoubtToo(t *testing.T) {
	for _, doubt := range []bool{true, false} {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 && doubt {
				conn, _, err := w.(http.Hijacker).Hijack() // taken, and no answer
				if err != nil {
					t.Error(err)
					return
				}
				_ = conn.Close()
				return
			}
			writeError(w, http.StatusConflict, codeTaskExists, "a task of that name is open", nil)
		}))
		c := &Client{URL: srv.URL, Deadline: 5 * time.Second,
			Backoff: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 5}}
		_, err := c.CreateTask(context.Background(), taskNamed("team", "t"), 10)
		srv.Close()
		if !errors.Is(err, ErrTaskExists) || errors.Is(err, ErrNoAnswer) != doubt {
			t.Errorf("an earlier attempt in doubt: %v; answer %v, want ErrTaskExists, and ErrNoAnswer only after the doubt", doubt, err)
		}
	}
}

// Checked, holds (and kept so by the fix above): a balance read changes nothing, so an attempt
// of it that went unanswered leaves nothing in doubt: a later attempt's answer (no account:
// the REST apiserver's 404) is the call's.
func TestABalanceReadAnsweredAfterAnUnansweredAttemptIsThatAnswer(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 1 {
			writeError(w, http.StatusNotFound, codeAccountNotFound, "no account", nil)
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_ = conn.Close()
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL, Deadline: 5 * time.Second,
		Backoff: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 5}}
	if _, err := c.Balance(context.Background(), "team"); !errors.Is(err, ErrAccountNotFound) || errors.Is(err, ErrNoAnswer) {
		t.Errorf("%v: want ErrAccountNotFound, the answer of the second attempt", err)
	}
}

// An attempt whose connection never opened (the
// ledger Service still points at the pod of a manager whose node died: the SYN is dropped, the
// dial hangs) ends at the attempt's timeout as "Client.Timeout exceeded while awaiting
// headers", which is no dial error in Go's error chain, so the Client counts it as an attempt
// that went out and got no answer: the call ends ErrNoAnswer, "the task may have been created",
// though no byte of it reached any manager.
//
// Interleaving: 1. the elected manager's node dies; its pod address stays in the ledger's
// EndpointSlice until the next manager is elected and publishes its own (the Lease's 15 s, then
// its build); 2. a replica's create dials that address: no answer, no refusal, until the 10 s
// attempt timeout; 3. the call's 15 s deadline ends the retries, or the next attempt is refused
// (402: with the fix of TestARefusalAfterAnAttemptInDoubtKeepsTheCallInDoubt, in doubt too).
//
// What the user sees: 503 "did not answer in time and the task may have been created" (keyless)
// for a task that was never sent: a client that believes it waits for a task that never shows,
// instead of retrying. Nothing was sent: the call is ErrNotReady ("electing", retry).
func TestAnAttemptWhoseConnectionNeverOpenedLeavesNothingInDoubt(t *testing.T) {
	blackHole := make(chan struct{})
	defer close(blackHole)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Control: func(string, string, syscall.RawConn) error {
		<-blackHole // the SYN to the dead node's pod address is dropped
		return errors.New("the test is over")
	}}).DialContext
	c := &Client{URL: "http://10.0.0.5:8084", HTTP: &http.Client{Timeout: 50 * time.Millisecond, Transport: tr},
		Deadline: 300 * time.Millisecond, Backoff: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 100}}
	_, err := c.CreateTask(context.Background(), taskNamed("team", "t"), 10)
	if !errors.Is(err, ErrNotReady) || errors.Is(err, ErrNoAnswer) {
		t.Errorf("%v: want ErrNotReady (no attempt was sent), not ErrNoAnswer (\"may have been created\")", err)
	}
}

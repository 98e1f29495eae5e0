package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// A REST apiserver replica asks the ledger for every submission, many at a time. Its default
// client keeps those connections open between calls (net/http keeps 2 per host, so the rest
// were closed and dialed again for every call) and sets its token source up once for all.
func TestTheClientKeepsItsConnectionsToTheLedger(t *testing.T) {
	var dials, unauthorized atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer replica-token" {
			unauthorized.Add(1)
		}
		writeJSON(w, http.StatusOK, Figures{Balance: 7})
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(tokenFile, []byte("replica-token\n"), 0o600))

	c := &Client{URL: srv.URL, TokenFile: tokenFile}
	const concurrent, rounds = 64, 5
	for range rounds {
		var wg sync.WaitGroup
		for range concurrent {
			wg.Go(func() {
				if f, err := c.Balance(context.Background(), "team"); err != nil || f.Balance != 7 {
					t.Errorf("balance %+v, %v", f, err)
				}
			})
		}
		wg.Wait()
	}
	if n := dials.Load(); n > 2*concurrent {
		t.Fatalf("%d connections dialed for %d calls, %d at a time: want them kept open (at most %d)", n, concurrent*rounds, concurrent, 2*concurrent)
	}
	if n := unauthorized.Load(); n != 0 {
		t.Fatalf("%d calls without the token", n)
	}
}

// hungLedger is a manager that takes calls and never answers (kill -STOP): each call waits
// until its caller gives up.
func hungLedger(t *testing.T) *httptest.Server {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv
}

// A hung manager costs a call the Client's one Deadline, however many attempts fit in it, and
// the caller learns that the ledger did not answer, not that it is electing.
func TestAHungLedgerCostsACallOneDeadline(t *testing.T) {
	srv := hungLedger(t)
	// Per attempt 200 ms, ten attempts: without one deadline over them, a call takes over 2 s.
	c := &Client{URL: srv.URL, HTTP: &http.Client{Timeout: 200 * time.Millisecond},
		Backoff: wait.Backoff{Duration: 10 * time.Millisecond, Steps: 10}, Deadline: 300 * time.Millisecond}
	for name, call := range map[string]func() error{
		"balance": func() error { _, err := c.Balance(context.Background(), "team"); return err },
		"create":  func() error { _, err := c.CreateTask(context.Background(), taskNamed("team", "t"), 10); return err },
	} {
		started := time.Now()
		err := call()
		if took := time.Since(started); took > time.Second {
			t.Errorf("%s: the call took %v, want about its 300 ms deadline", name, took.Round(time.Millisecond))
		}
		if !errors.Is(err, ErrNoAnswer) || errors.Is(err, ErrNotReady) {
			t.Errorf("%s: %v; want ErrNoAnswer (the ledger did not answer in time), not ErrNotReady (electing)", name, err)
		}
	}
}

// A ledger that answers not_ready (a failover, books being rebuilt) is still reported as not
// ready, and the waits between attempts end at the deadline too.
func TestANotReadyLedgerIsNotReadyWithinTheDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeLedgerError(w, ErrNotReady)
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL, Backoff: wait.Backoff{Duration: time.Second, Steps: 10}, Deadline: 300 * time.Millisecond}
	started := time.Now()
	_, err := c.Balance(context.Background(), "team")
	if took := time.Since(started); took > time.Second {
		t.Errorf("the call took %v, want about its 300 ms deadline", took.Round(time.Millisecond))
	}
	if !errors.Is(err, ErrNotReady) || errors.Is(err, ErrNoAnswer) {
		t.Errorf("%v: want ErrNotReady", err)
	}
}

// A caller that gives up is told so: the ledger did not fail to answer it.
func TestACallerThatGivesUpIsNotANoAnswer(t *testing.T) {
	srv := hungLedger(t)
	c := &Client{URL: srv.URL, Deadline: 5 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Balance(ctx, "team")
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNoAnswer) || errors.Is(err, ErrNotReady) {
		t.Errorf("%v: want the caller's own context error", err)
	}
}

func taskNamed(namespace, name string) *videogenv1alpha1.VideoTask {
	return &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

// A create the caller got wrong (a negative price, a task without a name) is a 400 naming what
// is wrong, not a 500: the ledger endpoint's errors are the REST apiserver's to map.
func TestTheLedgerEndpointRefusesABadCreateWith400(t *testing.T) {
	srv := httptest.NewServer(Handler(&Ledger{}))
	defer srv.Close()
	for _, body := range []string{
		`{"price":-100,"task":{"metadata":{"name":"t","namespace":"team"}}}`,
		`{"price":10,"task":{"metadata":{"namespace":"team"}}}`,
	} {
		resp, err := http.Post(srv.URL+"/ledger/v1/namespaces/team/tasks", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var e errorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || e.Error.Code != codeInvalid {
			t.Errorf("%s: %d %+v, want 400 %s", body, resp.StatusCode, e.Error, codeInvalid)
		}
	}
}

// A manager that dies after it took a create (the connection closes unanswered), and then no
// manager listens until the deadline: the create may have landed, so the call is ErrNoAnswer,
// not ErrNotReady ("no manager listened": nothing was created), whatever the last attempt found.
func TestACallThatWentOutUnansweredIsNoAnswerThoughNoManagerListensAfter(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_ = srv.Listener.Close() // the process dies: its port stops listening
		_ = conn.Close()
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL, Deadline: 500 * time.Millisecond,
		Backoff: wait.Backoff{Duration: 20 * time.Millisecond, Factor: 1.5, Steps: 100, Cap: 50 * time.Millisecond}}
	_, err := c.CreateTask(context.Background(), taskNamed("team", "t"), 10)
	if !errors.Is(err, ErrNoAnswer) || errors.Is(err, ErrNotReady) {
		t.Errorf("%v: want ErrNoAnswer (the create may have landed), not ErrNotReady (nothing was created)", err)
	}
	// Nothing went out at all: ErrNotReady.
	_, err = c.CreateTask(context.Background(), taskNamed("team", "t"), 10)
	if !errors.Is(err, ErrNotReady) || errors.Is(err, ErrNoAnswer) {
		t.Errorf("%v: want ErrNotReady (no manager listened)", err)
	}
}

// The default backoff reaches its 2 s cap after about 5 s: the retries go on at the cap until
// the call's 15 s deadline (wait.Backoff.Step ends them at the cap), so a failover of 8 s is
// waited out.
func TestTheDefaultClientRetriesUntilItsDeadline(t *testing.T) {
	var calls atomic.Int32
	var first atomic.Pointer[time.Time]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		now := time.Now()
		first.CompareAndSwap(nil, &now)
		if time.Since(*first.Load()) < 8*time.Second {
			writeLedgerError(w, ErrNotReady)
			return
		}
		writeJSON(w, http.StatusOK, Figures{Balance: 7})
	}))
	defer srv.Close()
	started := time.Now()
	f, err := (&Client{URL: srv.URL}).Balance(context.Background(), "team")
	if err != nil || f.Balance != 7 {
		t.Fatalf("after %v and %d attempts: %+v, %v; want the balance once the 8 s failover is over, within the 15 s deadline",
			time.Since(started).Round(100*time.Millisecond), calls.Load(), f, err)
	}
}

// A create the kube-apiserver refuses with 403 (a ResourceQuota used up, an admission policy)
// stored nothing: the endpoint answers 403 create_refused with the kube-apiserver's message, and
// the client passes it on as a RefusedError (a 4xx of the request's), not as an error of the
// service's. The manager's own refusal of the replica's credentials stays the service's fault.
func TestARefusedCreateIsA403CreateRefused(t *testing.T) {
	quota := apierrors.NewForbidden(schema.GroupResource{Group: "videogen.dev", Resource: "videotasks"}, "t",
		errors.New("exceeded quota: tasks, requested: count/videotasks.videogen.dev=1, used: count/videotasks.videogen.dev=0, limited: count/videotasks.videogen.dev=0"))
	rec := httptest.NewRecorder()
	writeLedgerError(rec, fmt.Errorf("creating task: %w", quota))
	var e errorBody
	must(t, json.NewDecoder(rec.Body).Decode(&e))
	if rec.Code != http.StatusForbidden || e.Error.Code != codeCreateRefused || !strings.Contains(e.Error.Message, "exceeded quota") {
		t.Errorf("%d %+v, want 403 %s with the quota's message", rec.Code, e.Error, codeCreateRefused)
	}
	// A ValidatingAdmissionPolicy without a reason refuses as an Invalid whose one cause is its
	// message, of no field type: the namespace's refusal too, not a 400 of the request's.
	const denial = "ValidatingAdmissionPolicy 'no-tasks' with binding 'no-tasks' denied request: tasks are closed here"
	policy := apierrors.NewForbidden(schema.GroupResource{Group: "videogen.dev", Resource: "videotasks"}, "t", errors.New(denial))
	policy.ErrStatus.Reason, policy.ErrStatus.Code = metav1.StatusReasonInvalid, http.StatusUnprocessableEntity
	policy.ErrStatus.Details.Causes = []metav1.StatusCause{{Message: denial}}
	rec = httptest.NewRecorder()
	writeLedgerError(rec, fmt.Errorf("creating task: %w", policy))
	must(t, json.NewDecoder(rec.Body).Decode(&e))
	if rec.Code != http.StatusForbidden || e.Error.Code != codeCreateRefused || !strings.Contains(e.Error.Message, "tasks are closed here") {
		t.Errorf("a policy's Invalid: %d %+v, want 403 %s with the policy's message", rec.Code, e.Error, codeCreateRefused)
	}

	for _, tc := range []struct {
		status     int
		code       string
		wantRefuse bool
	}{
		{http.StatusForbidden, codeCreateRefused, true},
		{http.StatusBadRequest, codeInvalid, true},
		{http.StatusUnprocessableEntity, "some_later_code", true},
		{http.StatusUnauthorized, "unauthorized", false},
		{http.StatusForbidden, "forbidden", false},
		{http.StatusInternalServerError, codeInternal, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, tc.status, tc.code, "why", nil)
		}))
		_, err := (&Client{URL: srv.URL}).CreateTask(context.Background(), taskNamed("team", "t"), 10)
		srv.Close()
		var refused *RefusedError
		if got := errors.As(err, &refused); got != tc.wantRefuse || got && (refused.Status != tc.status || refused.Code != tc.code || refused.Message != "why") {
			t.Errorf("%d %s: %v (%+v), want a RefusedError: %v", tc.status, tc.code, err, refused, tc.wantRefuse)
		}
	}
}

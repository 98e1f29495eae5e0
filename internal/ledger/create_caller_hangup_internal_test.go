package ledger

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// The ledger's REST create sends the kube create
// with the HTTP request's context, so when the REST apiserver replica hangs up (its client
// disconnected, or its 10 s attempt timeout passed) the create is cut on the manager's side:
// client-go returns "context canceled", though the request went out and the kube-apiserver may
// still store it. The ledger's re-read, made at once, finds no task (the create has not been
// stored yet), takes that as the create having certainly failed, and ends its hold. The task
// is then stored: its event is a hold the books did not count (rule 2), counted only if the
// balance still covers it, which a second create admitted meanwhile with the freed points
// no longer does.
//
// Interleaving (one manager): 1. a replica's create of "a" at 60 (balance 100) is admitted and
// its kube create sent; 2. the replica hangs up (the REST client went away, the replica's
// timeout): the manager's request context ends, and client-go's Create returns at once; 3. the
// ledger re-reads "a": not there yet; the hold ends; 4. another create of the account, "b" at
// 60, is admitted with the points "a" held; 5. the kube-apiserver stores "a"; its event comes.
// Reachable: a client that disconnects while its submission is in flight is ordinary, and a
// create the kube-apiserver finishes after its client left is what a client-side cancel means
// (the request was sent).
//
// What the user sees: "a", admitted when the account could pay for it, ends InsufficientBalance
// (Overdrawn) and the keyed retry of its client replays a failed task; or, had "a" not been
// re-admitted, two tasks at 60 on 100 points. The create must not be cut by the caller leaving:
// the ledger needs its answer to know what it holds.
func TestACreateWhoseCallerHangsUpIsNotCutShort(t *testing.T) {
	h := newHarness(t, 100)
	inFlight, proceed := make(chan struct{}), make(chan struct{})
	var late *videogenv1alpha1.VideoTask // the create the kube-apiserver stores after its client left
	l := h.startWith(h.ctx, "ledger-21h", func(cfg *Config) {
		cfg.Client = interceptor.NewClient(k8s, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if task, ok := obj.(*videogenv1alpha1.VideoTask); ok && task.Name == "a" {
					close(inFlight) // step 1: sent
					<-proceed
					if ctx.Err() != nil {
						late = task.DeepCopy() // step 2: client-go gives up; the request is on its way
						return ctx.Err()
					}
				}
				return c.Create(ctx, obj, opts...)
			},
		})
	})
	h.l = l

	callerCtx, hangUp := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := l.CreateTask(callerCtx, h.task("a"), 60)
		done <- err
	}()
	<-inFlight
	hangUp() // step 2
	close(proceed)
	errA := <-done // step 3 happened inside

	_, errB := l.CreateTask(h.ctx, h.task("b"), 60) // step 4
	if late != nil {
		must(t, k8s.Create(h.ctx, late)) // step 5
		h.feed(l, late)
	}
	a := &videogenv1alpha1.VideoTask{}
	must(t, k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "a"}, a))
	v, err := l.View(a)
	must(t, err)
	var short *InsufficientBalanceError
	if v.Standing != Held || !errors.As(errB, &short) {
		t.Fatalf("the create of a, whose caller hung up (%v), was stored: a stands %v, the create of b at 60 after it: %v;\n"+
			"want a Held (admitted when the account could pay) and b refused 402 (40 available)", errA, v.Standing, errB)
	}
	if f := h.figures(l); f.Frozen != 60 || f.Balance != 40 {
		t.Errorf("figures %+v, want 60 frozen for a, 40 available", f)
	}
}

// A REST create the kube-apiserver answers 504
// Timeout ("the request did not complete within the requested timeout"; the operation may
// still complete, as the Status reason says) is taken as failed when the ledger's re-read, made
// at once, finds no task yet: the hold ends, and the replica is answered 500 internal_error.
// The create then lands: a hold the books did not count (rule 2), overdrawn if the freed points
// went to another create meanwhile.
//
// Interleaving: 1. a create of "a" at 60 (balance 100) is admitted and sent; 2. the
// kube-apiserver's handler times out waiting for etcd (a slow disk, a leader change) and
// answers 504, the write still queued in etcd; 3. the ledger re-reads "a": not there yet; 4. a
// create of "b" at 60 is admitted; 5. etcd commits "a"; its event comes. Reachable under any
// etcd slowness long enough for the kube-apiserver's request timeout.
//
// What the user sees: 500 internal_error for a task that then runs (a keyless client that
// retries pays twice), or, with "b" admitted, "a" ends InsufficientBalance though it was admitted
// when the account could pay. A timeout is no answer: the create is in doubt (503 "may have
// been created") and its hold stays until a read settles it.
func TestACreateTheKubeAPIServerTimedOutIsInDoubtThoughNotStoredYet(t *testing.T) {
	for name, answer := range map[string]error{
		"504 Timeout": apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0),
		// etcd's own timeout, answered 500: the write may commit after it (added once a
		// review named it: the same late landing as a 504).
		"500 etcdserver: request timed out": apierrors.NewInternalError(errors.New("etcdserver: request timed out")),
		"503 from the kube-apiserver":       apierrors.NewServiceUnavailable("etcdserver: leader changed"),
	} {
		t.Run(name, func(t *testing.T) { expectInDoubtUntilItLands(t, answer) })
	}
}

// A create the kube-apiserver shed (429: API Priority and Fairness refuses it before anything
// is stored) is no failure of the service's: the ledger answers 503 not_ready, which the REST
// replica's client retries, instead of a 500 (added after the review of the REST apiserver-to-ledger hop).
func TestACreateTheKubeAPIServerShedIsNotReadyNot500(t *testing.T) {
	rec := httptest.NewRecorder()
	writeLedgerError(rec, fmt.Errorf("creating task: %w", apierrors.NewTooManyRequests("too many requests, please try again later", 1)))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), codeNotReady) || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a create shed with 429: %d %s (Retry-After %q), want 503 %s with Retry-After", rec.Code, rec.Body.String(), rec.Header().Get("Retry-After"), codeNotReady)
	}
}

// The other side of TestACreateWhoseCallerHangsUpIsNotCutShort: a caller that hung up before
// its create was sent (it waited for the account's lock behind a rebuild, past the replica's
// 10 s attempt timeout) has nothing sent for it: no task, no hold. Nothing was on its way to
// the kube-apiserver, so nothing can land.
func TestACreateWhoseCallerHungUpBeforeItWasSentCreatesNothing(t *testing.T) {
	h := newHarness(t, 100)
	gone, hangUp := context.WithCancel(h.ctx)
	hangUp()
	if _, err := h.l.CreateTask(gone, h.task("a"), 60); err == nil {
		t.Fatal("a create whose caller was gone before it was sent: created")
	}
	err := k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "a"}, &videogenv1alpha1.VideoTask{})
	if !isNotFound(err) {
		t.Errorf("task a: %v, want none", err)
	}
	if f := h.figures(h.l); f.Frozen != 0 || f.Balance != 100 {
		t.Errorf("figures %+v, want nothing held", f)
	}
}

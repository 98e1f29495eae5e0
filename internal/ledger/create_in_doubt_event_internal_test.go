package ledger

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// A REST create whose answer is lost after the
// commit, and whose re-reads are not answered, is in doubt; but if the create's own Add event
// reached the ledger meanwhile (the informer's watch stream is up while single GETs are
// throttled), observe has named the entry's task (its UID, its hold Held). CreateTask then
// skipped the in-doubt answer (it is only for an entry without a UID) and returned the create's
// raw error: the ledger endpoint answered 500 internal_error, the Client a plain error, and the
// REST apiserver its client 500 "internal error", for a task that exists, holds its price and
// runs. A keyless client told 500 submits again: a second task, a second hold and charge for
// one submission (the very outcome TestACreateLeftInDoubtByTheLedgerIsNoAnswerToTheReplica
// fixed for the entry without a UID).
//
// Interleaving (one manager, its endpoint served to a Client as a replica has it):
//  1. Balance 100. A replica's Client sends a create of "a" at 60; the hold is counted.
//  2. The kube-apiserver commits the task and the answer is lost (a timeout after the commit).
//  3. The ledger re-reads "a"; the reads are throttled (429) past readTask's retries. During
//     them the informer delivers the Add of "a" (with its signed admission): the books name it.
//  4. The ledger answers the replica.
//
// Reachable: steps 2 and 3 are the faults of TestACreateLeftInDoubtByTheLedgerIsNoAnswerToTheReplica
// (an overloaded kube-apiserver throttling GETs, whose watches keep streaming); the Add event
// comes within the seconds readTask retries. What a user sees: 500 internal_error for a task
// that exists and runs.
func TestACreateNamedByItsEventWhileInDoubtIsNoInternalErrorToTheReplica(t *testing.T) {
	h := newHarness(t, 100)
	var outage, delivered atomic.Bool
	var l *Ledger
	l = h.startWith(h.ctx, "ledger-20a", func(cfg *Config) {
		cfg.Reader = interceptor.NewClient(k8s, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*videogenv1alpha1.VideoTask); ok && outage.Load() {
					if !delivered.Swap(true) {
						// Step 3: the watch brings the create's Add while GETs are throttled.
						created := &videogenv1alpha1.VideoTask{}
						if err := k8s.Get(ctx, key, created); err != nil {
							t.Errorf("reading the created task: %v", err)
						} else {
							h.feed(l, created)
						}
					}
					return apierrors.NewTooManyRequests("the kube-apiserver is throttling", 1)
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
	})
	h.l = l
	srv := httptest.NewServer(Handler(l))
	defer srv.Close()
	c := &Client{URL: srv.URL, Deadline: 30 * time.Second,
		Backoff: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 1}}

	h.faults.creates.Store(1) // step 2
	outage.Store(true)        // step 3
	_, err := c.CreateTask(h.ctx, h.task("a"), 60)
	outage.Store(false)
	if !delivered.Load() {
		t.Fatal("the create's Add event was not delivered during its re-reads")
	}
	must(t, k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "a"}, &videogenv1alpha1.VideoTask{}))
	if err != nil && !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("the replica's answer for a create that landed, named by its event while its re-reads failed: %v;\n"+
			"want it created or ErrNoAnswer (503 \"may have been created\"), not an internal error", err)
	}
	if f := h.figures(l); f.Frozen != 60 || f.Holds != 1 {
		t.Fatalf("figures %+v: want the one task holding 60", f)
	}
}

// The books of an account that appears while the
// ledger runs are built by rebuild, which retries a failed build once a second. During that
// second the books are neither building nor built for the account, so the account's next event
// (the PointAccount controller adding its finalizer, an administrator's edit) starts a second
// rebuild loop. Both loops then build: the second build to run replaces books that are live,
// from a list of the open tasks that misses a REST create still on its way. That create's hold
// is gone from the books, so another create is admitted against points the first one holds;
// when the first create lands it is answered 201 and counted as an admission the books did not
// make: overdrawn, and refused before it runs (or, had the balance covered it, counted late).
//
// Interleaving (one manager; the account's events fed by hand, the clock stepped by hand):
//  1. A namespace's account (balance 100) appears; its event starts rebuild #1, whose first read
//     of the account fails (a kube-apiserver hiccup): it waits a second to try again.
//  2. The account's next event (its finalizer added) starts rebuild #2, which builds the books.
//  3. A REST create of "a" at 60: counted (frozen 60), its create on its way.
//  4. Rebuild #1 wakes and builds the books again: the list has no "a"; its hold is dropped.
//  5. A REST create of "b" at 60: 100 − 60 leaves 40, so it must be refused 402.
//
// Reachable: step 1 needs one failed GET, step 2 any update of the account within that second
// (the PointAccount controller adds its finalizer to every new account at once). What a user
// sees: "a" and "b" both answered 202 for 120 points on a balance of 100; one of them then fails
// insufficient_balance after it was accepted.
func TestASecondRebuildOfANewAccountDoesNotDropAHoldOfTheLiveBooks(t *testing.T) {
	h := newHarness(t, 100)
	h.settle(h.l) // the harness's own ledger is done with the account; this test's runs alone

	clk := clocktesting.NewFakeClock(time.Now())
	var failAccountRead atomic.Bool
	failAccountRead.Store(true)
	aEntered, aRelease := make(chan struct{}), make(chan struct{})
	listed := make(chan struct{}, 4)
	signer, err := NewSigner(testKey)
	must(t, err)
	l := New(Config{
		Client: interceptor.NewClient(k8s, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if obj.GetName() == "a" {
					close(aEntered)
					<-aRelease
				}
				return c.Create(ctx, obj, opts...)
			},
		}),
		Reader: interceptor.NewClient(k8s, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*videogenv1alpha1.PointAccount); ok && failAccountRead.Swap(false) {
					return apierrors.NewInternalError(errors.New("etcd leader changed")) // step 1
				}
				return c.Get(ctx, key, obj, opts...)
			},
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				err := c.List(ctx, list, opts...)
				if _, ok := list.(*videogenv1alpha1.VideoTaskList); ok {
					listed <- struct{}{}
				}
				return err
			},
		}),
		Signer: signer, Identity: "ledger-20b", WriteInterval: 20 * time.Millisecond, Clock: clk,
	})
	l.ctx = h.ctx
	l.ready.Store(true)

	l.accountEvent(h.ctx, h.account(), false) // step 1: rebuild #1, whose read fails
	waitFor(t, clk.HasWaiters)                // rebuild #1 waits its second
	l.accountEvent(h.ctx, h.account(), false) // step 2: rebuild #2 builds the books
	<-listed
	waitFor(t, func() bool { _, err := l.Balance(h.ctx, h.ns); return err == nil })

	aDone := make(chan error, 1)
	go func() { _, err := l.CreateTask(h.ctx, h.task("a"), 60); aDone <- err }() // step 3
	<-aEntered
	if f := h.figures(l); f.Frozen != 60 {
		t.Fatalf("figures %+v while the create of a is on its way: want 60 frozen", f)
	}

	clk.Step(2 * time.Second) // step 4: rebuild #1 wakes
	select {
	case <-listed: // it built the books again; wait for the install under the account's lock
		b := l.book(h.ns)
		waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return !b.building })
	case <-time.After(3 * time.Second):
		// Rebuild #1 found the books built for this account and listed nothing (the fix).
	}

	_, errB := l.CreateTask(h.ctx, h.task("b"), 60) // step 5
	close(aRelease)
	if err := <-aDone; err != nil {
		t.Fatalf("the create of a: %v", err)
	}
	var short *InsufficientBalanceError
	if !errors.As(errB, &short) {
		t.Fatalf("the create of b at 60 while a holds 60 of 100: %v, want 402 insufficient balance "+
			"(a second rebuild of live books dropped a's hold)", errB)
	}
}

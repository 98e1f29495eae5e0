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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// keepsBooks (ef80007) reads the account from the
// kube-apiserver with the account's lock held, and so does every caller's refusal: Admit's
// InsufficientBalance, View's Overdrawn, Closable. The read has no deadline of its own (the
// ledger's context), so for as long as the kube-apiserver takes to answer it, nothing else of
// the account moves: Balance (GET /v1/balance, pure memory) waits, a REST CreateTask waits in
// lockBook (not bounded by its request's context), the writer waits, and every other
// reconcile of the namespace's tasks waits in View. The REST replica gives up after its
// 10 s attempt timeout and answers 503 "did not answer in time" (a create it then cannot
// tell landed), for a balance read that needed no kube-apiserver at all.
//
// Interleaving (one manager):
//  1. Balance 100. A kubectl task k is created and delivered; its reconcile asks Admit(k, 120):
//     the balance does not cover it, so Admit asks keepsBooks, which reads the account.
//  2. The kube-apiserver is slow to answer that read (overloaded: the same load that makes
//     everything else slow; here it answers only when the test says so).
//  3. Meanwhile a REST replica asks Balance of the namespace.
//
// Reachable: step 1 is any kubectl task the balance does not cover (or an overdrawn task, or
// an empty deleted account); step 2 is a kube-apiserver under load or a lost connection that
// takes until the HTTP/2 health check to notice. What a user sees: GET /v1/balance and every
// POST of the namespace hang (503 after the replica's deadline) while one refusal is read.
// With the fix the read is made outside the lock and the verdict decided again after it.
func TestARefusalsReadOfTheAccountDoesNotStallTheAccount(t *testing.T) {
	h := newHarness(t, 100)
	var slow atomic.Bool
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	l := h.startWith(h.ctx, "ledger-19", func(cfg *Config) {
		cfg.Reader = interceptor.NewClient(k8s, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*videogenv1alpha1.PointAccount); ok && slow.Load() {
					select {
					case entered <- struct{}{}:
					default:
					}
					<-release // step 2: the kube-apiserver answers when the test says so
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
	})
	h.l = l
	h.settle(l)
	k := h.task("k")
	must(t, k8s.Create(h.ctx, k))
	h.feed(l, k)

	slow.Store(true)
	admitted := make(chan error, 1)
	go func() { admitted <- admit(l, k, 120) }() // step 1
	<-entered                                    // keepsBooks' read is under way

	balance := make(chan error, 1)
	go func() { // step 3
		_, err := l.Balance(h.ctx, h.ns)
		balance <- err
	}()
	select {
	case err := <-balance:
		must(t, err)
	case <-time.After(3 * time.Second):
		close(release)
		<-balance
		t.Fatal("Balance waited for a kube-apiserver read made under the account's lock by a refusal " +
			"(keepsBooks): one slow read stalls every create and balance read of the account")
	}
	close(release)
	var short *InsufficientBalanceError
	if err := <-admitted; !errors.As(err, &short) {
		t.Fatalf("Admit(k, 120) on 100: %v, want InsufficientBalance once the read says this manager keeps the books", err)
	}
}

// With the fix above (fails before it, as the test above): the verdict is decided again after the read. While
// keepsBooks' read was out, a top-up landed: the refusal the read was for no longer stands,
// and k is admitted instead of refused from the balance before it.
func TestARefusalIsDecidedAgainAfterItsRead(t *testing.T) {
	h := newHarness(t, 100)
	var slow atomic.Bool
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	l := h.startWith(h.ctx, "ledger-19b", func(cfg *Config) {
		cfg.Reader = interceptor.NewClient(k8s, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*videogenv1alpha1.PointAccount); ok && slow.Load() {
					slow.Store(false)
					entered <- struct{}{}
					<-release
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
	})
	h.l = l
	h.settle(l)
	k := h.task("k")
	must(t, k8s.Create(h.ctx, k))
	h.feed(l, k)

	slow.Store(true)
	admitted := make(chan error, 1)
	go func() { admitted <- admit(l, k, 120) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("Admit did not read the account")
	}
	// The books move while the read is out (the lock is free with the fix): a credit lands.
	b := l.book(h.ns)
	if !b.mu.TryLock() {
		close(release)
		<-admitted
		t.Fatal("the account's lock is held across keepsBooks' read")
	}
	acct := b.account.DeepCopy()
	acct.Status.Credited += 50
	b.account = acct
	b.mu.Unlock()
	close(release)
	if err := <-admitted; err != nil {
		t.Fatalf("Admit(k, 120) once the account has 150: %v, want admitted (decided from the books after the read)", err)
	}
}

// A REST create the ledger leaves in doubt (its
// create reported an error that may follow a commit, and its re-read was not answered:
// settleDoubt keeps its hold until a read says) is answered by the ledger endpoint 500
// internal_error. The ledger Client turns a 500 into a plain error, neither ErrNoAnswer nor
// ErrNotReady, and the REST apiserver answers its client 500 "internal error". The create may
// have landed (here it did): the API promises "the task may have been created" (a 503 with a
// keyless request's warning, docs/api.md) exactly for this, and a keyless client told 500
// creates the task again: two tasks, two holds, two charges for one submission.
//
// Interleaving (one manager, its endpoint served to a Client as a replica has it):
//  1. Balance 100. A replica's Client sends a create of "a" at 60.
//  2. The kube-apiserver commits the task and the answer is lost (a timeout after the commit).
//  3. The ledger's re-reads of "a" are throttled (429) past readTask's retries: in doubt, the
//     hold kept, settleDoubt started.
//  4. The ledger answers the replica.
//
// Reachable: steps 2 and 3 are the faults of TestACreateInDoubtWhoseReadIsNotAnsweredKeepsItsHold
// (an overloaded kube-apiserver). What a user sees: 500 internal_error for a task that exists
// and runs; a keyless retry is a second task.
func TestACreateLeftInDoubtByTheLedgerIsNoAnswerToTheReplica(t *testing.T) {
	h := newHarness(t, 100)
	var outage atomic.Bool
	l := h.startWith(h.ctx, "ledger-19c", func(cfg *Config) {
		cfg.Reader = interceptor.NewClient(k8s, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*videogenv1alpha1.VideoTask); ok && outage.Load() {
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
	must(t, k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "a"}, &videogenv1alpha1.VideoTask{}))
	if !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("the replica's answer for a create the ledger left in doubt (it landed): %v;\n"+
			"want ErrNoAnswer (503 \"may have been created\"), not an internal error", err)
	}
}

// A kubectl task's refusal for a suspended account
// is final too (reject: Failed, account_suspended), and it is decided from the books' copy of the
// account's spec, which only the account's informer events bring. The VideoTask and
// PointAccount watches are separate streams with no order between them: an administrator lifts
// the suspension, a task created after that (a GitOps sync applying both, a tenant told "it is
// lifted") is delivered to the ledger and reconciled before the account's update is, and is
// refused for good for a suspension that had ended before it was created.
//
// Interleaving (one manager): 1. the account is suspended, and the ledger's books know it;
// 2. an administrator lifts the suspension (the ledger's account event for it lags); 3. a
// kubectl task k is created and delivered; its reconcile asks Admit(k, 10). Reachable: any lag
// of the account informer behind the task informer (a relist, a slow stream), for as long as it
// lasts. What a user sees: kubectl get videotask k: Failed, "the account is suspended", on an
// account whose spec says it is not.
func TestASuspensionLiftedBeforeAKubectlTaskDoesNotRefuseItFromAStaleSpec(t *testing.T) {
	h := newHarness(t, 100)
	h.settle(h.l)
	suspend := func(on bool) *videogenv1alpha1.PointAccount {
		var acct *videogenv1alpha1.PointAccount
		must(t, retryOnConflict(func() error {
			acct = h.account()
			acct.Spec.Suspended = on
			return k8s.Update(h.ctx, acct)
		}))
		return acct
	}
	h.l.accountEvent(h.ctx, suspend(true), false) // 1.
	suspend(false)                                // 2. (its event lags)
	k := h.task("k")
	must(t, k8s.Create(h.ctx, k)) // 3.
	h.feed(h.l, k)
	if err := admit(h.l, k, 10); errors.Is(err, ErrAccountSuspended) {
		t.Fatalf("Admit(k) refuses it for good (%v) from the books' copy of the account's spec, "+
			"though the suspension was lifted before k was created", err)
	}
	// Checked, holds: a suspension the kube-apiserver still shows refuses a kubectl task.
	h.l.accountEvent(h.ctx, suspend(true), false)
	k2 := h.task("k2")
	must(t, k8s.Create(h.ctx, k2))
	h.feed(h.l, k2)
	if err := admit(h.l, k2, 10); !errors.Is(err, ErrAccountSuspended) {
		t.Fatalf("Admit(k2) on a suspended account: %v, want ErrAccountSuspended", err)
	}
}

func retryOnConflict(f func() error) error {
	for {
		err := f()
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

package ledger

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// The books' rebuild on election: the list-then-watch window, fences and deleted accounts.

// Start lists the open tasks from the kube-apiserver and only then adds its handlers to the
// manager's task informer (watch). That informer is already running: the VideoTask controller's
// watch starts it as the manager is elected, side by side with the ledger's Start, and it syncs
// while the ledger writes its fences. A handler added to a running informer is told only of
// what the informer holds then (one Add per cached object), never of what went before. A task
// that leaves the informer between the ledger's list and its handler (deleted; or closed, which
// takes it out of the cache's selection) is in the books, held, and its delete event never
// comes: its hold never ends. Frozen never returns to 0, the balance stays short by its price
// (402s for a customer who can pay), and a deleted account can never go, until the next
// failover rebuilds the books.
//
// Interleaving: t held at 10 (by the earlier manager); the new manager's Start fences the
// account and lists the open tasks (t among them) and then the top-ups; meanwhile the tenant
// deletes t (kubectl delete: a queued task has no finalizer, so it goes at once) and the
// informer, already running, drops it from its cache; Start adds its handlers.
//
// Reachable: the controllers and the ledger are both leader-election runnables, started
// together, and the controllers' watches create and sync the task informer while the ledger
// fences (one write per account); a tenant may delete its tasks at any time.
func TestATaskDeletedBetweenTheListAndTheWatchEndsItsHold(t *testing.T) {
	h := newHarness(t, 100)
	task := h.create(h.l, "t", 10)
	h.books(h.settle(h.l), 100, 0, 10)

	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	// The VideoTask controller's watch starts the task informer.
	informers := managerCache(t, ctx, &videogenv1alpha1.VideoTask{})

	var once atomic.Bool
	var hookErr error
	reader := interceptor.NewClient(k8s, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if _, ok := list.(*videogenv1alpha1.PointTopUpList); ok && once.CompareAndSwap(false, true) {
				// After the list of tasks: the tenant deletes t, and the informer drops it.
				if hookErr = k8s.Delete(ctx, task); hookErr == nil {
					hookErr = waitGone(ctx, informers, task)
				}
			}
			return nil
		},
	})
	signer, err := NewSigner(testKey)
	must(t, err)
	l := New(Config{Client: k8s, Reader: reader, Cache: informers, Signer: signer, Identity: "ledger-2", WriteInterval: 20 * time.Millisecond})
	started := make(chan error, 1)
	go func() { started <- l.Start(ctx) }()
	waitFor(t, l.Ready)
	must(t, hookErr)
	if !once.Load() {
		t.Fatal("t was not deleted between the list of tasks and the handlers")
	}
	time.Sleep(200 * time.Millisecond) // any event the informer has for t is delivered by now
	if f := h.figures(l); f.Frozen != 0 || f.Holds != 0 || f.Balance != 100 {
		t.Errorf("figures %+v: t is gone, want nothing frozen and 100 available", f)
	}
	h.books(h.settle(l), 100, 0, 0)
}

// managerCache is the manager's cache, as cmd/manager configures it (open tasks only), started
// with the informers of kinds running and synced, as the controllers' watches leave it before
// the ledger's Start adds its handlers.
func managerCache(t *testing.T, ctx context.Context, kinds ...client.Object) cache.Cache {
	t.Helper()
	informers, err := cache.New(restConfig, cache.Options{Scheme: k8s.Scheme(), ByObject: map[client.Object]cache.ByObject{
		&videogenv1alpha1.VideoTask{}: {Field: openTasksSelector},
	}})
	must(t, err)
	go func() { _ = informers.Start(ctx) }()
	for _, obj := range kinds {
		_, err := informers.GetInformer(ctx, obj)
		must(t, err)
	}
	if !informers.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	return informers
}

// waitGone waits until the cache no longer has obj.
func waitGone(ctx context.Context, c cache.Cache, obj client.Object) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), &videogenv1alpha1.VideoTask{})
		if isNotFound(err) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return context.DeadlineExceeded
}

// takeOver writes this manager's identity into the account until it is there: on a conflict it
// reads the account again and writes again, whoever's identity the fresh copy shows. So a
// manager that lost its election in the middle of its takeover (a process paused past its
// Lease: a CPU-throttled container, a long GC pause, a network partition that heals) writes
// over the fence of the manager elected after it. From then on the deposed manager's account
// writes land (docs/ledger.md: "no write of an earlier manager still in flight can land"), its
// books decide beside the elected manager's until it notices it lost the Lease, and the elected
// manager, seeing another's authority in an event or on its next write's conflict, steps down
// and exits (ErrFenced), holding the Lease: no manager decides until the Lease expires and
// another is elected.
//
// Interleaving: manager A reads the account (its Start's list of accounts, or build's Get) and
// is paused; B is elected, fences the account and builds its books; A resumes: its fence write
// conflicts, it reads the account (authority B) and writes its own authority over B's; B's
// informer brings that copy.
//
// Reachable: a process pause longer than the Lease's duration is the case fencing exists for;
// A's leader elector notices the lost Lease only at its next renew (every 2 s), while the
// conflict, the read and the write take milliseconds.
//
// Fixed with the Lease (Config.Lease): A reads it after its fence lands, finds it lost, and
// stops before it writes anything else; B, which still holds the Lease, writes over A's fence
// instead of stepping down.
func TestAManagerDoesNotWriteOverTheFenceOfTheManagerElectedAfterIt(t *testing.T) {
	h := newHarness(t, 100)
	task := h.create(h.l, "t", 10)
	h.books(h.settle(h.l), 100, 0, 10)
	var ls lease
	ls.take("ledger-A")
	var b *Ledger
	var once atomic.Bool
	signer, err := NewSigner(testKey)
	must(t, err)
	a := New(Config{Client: k8s, Signer: signer, Identity: "ledger-A", WriteInterval: 20 * time.Millisecond, Lease: ls.of("ledger-A"),
		Reader: interceptor.NewClient(k8s, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if err := c.Get(ctx, key, obj, opts...); err != nil {
					return err
				}
				if _, ok := obj.(*videogenv1alpha1.PointAccount); ok && once.CompareAndSwap(false, true) {
					// A is paused; B is elected and fences the account.
					ls.take("ledger-B")
					b = h.startWith(h.ctx, "ledger-B", func(cfg *Config) { cfg.Lease = ls.of("ledger-B") })
				}
				return nil
			},
		})})
	a.ctx = h.ctx
	if err := a.build(h.ctx, h.ns); !errors.Is(err, ErrFenced) {
		t.Fatalf("A's build after B's fence: %v, want it stopped (it lost its Lease)", err)
	}
	b.accountEvent(h.ctx, h.account(), false) // B's informer brings A's fence
	waitFor(t, func() bool { return h.account().Status.Authority == "ledger-B" })
	if !b.Ready() {
		t.Fatalf("B, the elected manager, stepped down: %v", b.deposedBy)
	}
	h.charge(b, task)
	h.books(h.settle(b), 100, 10, 0)
}

// A write of an account on its way while that account goes and a new account of the name is
// built: the write's answer comes after the new account's books are installed, and landed takes
// the written copy, the old account's, for the books' account (b.account = written). The books
// of the new account then hold the deleted account: every admission is refused
// ErrAccountClosing (its deletionTimestamp) though the new account is open, and the writer,
// dirty since the install, writes the old account again and again (NotFound, then "the account
// was replaced by a new one") and never writes the new one, until another event of the new
// account comes (nothing writes it: the ledger is its only writer, and its fence event was
// already seen).
//
// Interleaving: the account is empty and deleted (its finalizer keeps it); its deletion event
// makes the ledger write its status (Closing); that write lands, its answer is slow; the
// PointAccount controller finds it closable and removes the finalizer: the account goes (its
// delete event empties the books); the administrator creates the account again (a script:
// kubectl delete, then apply); its Add builds the new books (fence, lists, install); the slow
// answer comes.
//
// Reachable, narrowly: the answer of a write that landed can come seconds later (an overloaded
// kube-apiserver, a slow network); the controller's removal of the finalizer and the new
// account's creation and build take about as long. The fence event of the new account may be
// taken by the ledger before the answer (the lock is not fair), so it does not heal the books.
func TestAnAnswerForADeletedAccountDoesNotReplaceTheNewAccountsBooks(t *testing.T) {
	h := newHarness(t, 0)
	key := client.ObjectKey{Namespace: h.ns, Name: videogenv1alpha1.PointAccountName}
	old := h.account()
	unchanged := old.DeepCopy()
	old.Finalizers = []string{videogenv1alpha1.FinalizerLedger}
	must(t, k8s.Patch(h.ctx, old, client.MergeFrom(unchanged))) // the first ledger may be writing the status
	var l *Ledger
	var armed, once atomic.Bool
	var hookErr error
	var renewed *videogenv1alpha1.PointAccount
	l = h.startWith(h.ctx, "ledger-2", func(cfg *Config) {
		inner := cfg.Client
		cfg.Client = interceptor.NewClient(withWatch{inner}, interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if err := c.SubResource(sub).Update(ctx, obj, opts...); err != nil || !armed.Load() || !once.CompareAndSwap(false, true) {
					return err
				}
				// The write of the deleted account landed; its answer is slow.
				hookErr = func() error {
					gone := &videogenv1alpha1.PointAccount{}
					if err := k8s.Get(ctx, key, gone); err != nil {
						return err
					}
					if l.Closable(h.ns) != nil {
						return nil // not closable: the controller waits (the test fails below)
					}
					gone.Finalizers = nil
					if err := k8s.Update(ctx, gone); err != nil {
						return err
					}
					l.accountEvent(ctx, gone, true)
					renewed = &videogenv1alpha1.PointAccount{ObjectMeta: objectMeta(h.ns, videogenv1alpha1.PointAccountName)}
					if err := k8s.Create(ctx, renewed); err != nil {
						return err
					}
					l.accountEvent(ctx, renewed, false) // its Add: the new books are built
					deadline := time.Now().Add(10 * time.Second)
					for time.Now().Before(deadline) {
						b := l.book(h.ns)
						b.mu.Lock()
						done := !b.building && b.account != nil && b.account.UID == renewed.UID
						b.mu.Unlock()
						if done {
							return nil
						}
						time.Sleep(10 * time.Millisecond)
					}
					return context.DeadlineExceeded
				}()
				return nil
			},
		})
	})
	h.settle(l)
	must(t, k8s.Delete(h.ctx, old))
	deleting := h.account()
	armed.Store(true)
	l.accountEvent(h.ctx, deleting, false) // its deletion: the ledger writes Closing
	waitFor(t, once.Load)
	time.Sleep(300 * time.Millisecond) // the answer, and a few write intervals
	must(t, hookErr)
	if renewed == nil {
		t.Fatal("the deleted account was not closable")
	}
	b := l.book(h.ns)
	b.mu.Lock()
	uid := b.account.UID
	b.mu.Unlock()
	if uid != renewed.UID {
		t.Errorf("the books' account is %s (the deleted one), want the new account %s", uid, renewed.UID)
	}
	var short *InsufficientBalanceError
	if _, err := l.CreateTask(h.ctx, h.task("x"), 5); !errors.As(err, &short) {
		t.Errorf("a task in the new, empty account: %v, want 402 (InsufficientBalance)", err)
	}
	// The install's write of the new account (its summary and conditions) never comes: the
	// writer writes the deleted account instead, again and again.
	if a := h.account(); len(a.Status.Conditions) == 0 {
		t.Errorf("the new account's status was never written by the ledger (authority %q, no conditions)", a.Status.Authority)
	}
}

// Checked, holds (a pin): the new manager's fence write lands but reports an error, and in its
// pause before it reads the account again, the deposed manager's writer sends the write of a
// charge it queued just before. That write conflicts (the fence landed), the deposed manager
// finds the new authority and steps down; its charge is not in the account, and the new
// manager, which reads the account as fenced and lists the task held (its status was never
// Deducted), charges it once when its controller asks.
//
// Interleaving: t held on A; Charge(t) queued on A; B's fence lands and fails; A's writer runs
// (conflict, re-read, fenced); B re-reads the account (its own authority) and builds its books;
// B's controller: Charge(t); the account written.
func TestAFenceThatLandsButFailsStopsTheDeposedManagersChargeAndTheNewOneChargesOnce(t *testing.T) {
	h := newHarness(t, 100)
	a := h.stepped("ledger-A", nil)
	task := h.create(a.l, "t", 10)
	h.books(a.settle(), 100, 0, 10)
	a.chargeQueued(task)

	var reads atomic.Int32
	var hookErr error
	h.faults.accountUpdates.Store(1) // B's fence lands and reports an error
	b := h.startWith(h.ctx, "ledger-B", func(cfg *Config) {
		cfg.Reader = interceptor.NewClient(k8s, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*videogenv1alpha1.PointAccount); ok && reads.Add(1) == 2 {
					// B's re-read after its fence's error: A's writer runs first.
					ab := a.l.book(h.ns)
					hookErr = context.DeadlineExceeded
					for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
						ab.mu.Lock()
						fenced := ab.fenced
						ab.mu.Unlock()
						if fenced {
							hookErr = nil
							break
						}
						if a.clk.HasWaiters() {
							a.clk.Step(time.Second)
						}
						time.Sleep(5 * time.Millisecond)
					}
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
	})
	must(t, hookErr)
	if h.faults.accountUpdates.Load() > 0 {
		t.Fatal("B's fence did not land and fail")
	}
	expectDeposed(t, a.l)
	if got := h.account(); got.Status.Spent != 0 || got.Status.Authority != "ledger-B" {
		t.Fatalf("after the fence: %+v, want nothing spent, authority ledger-B", got.Status)
	}
	h.charge(b, task)
	h.books(h.settle(b), 100, 10, 0)
}

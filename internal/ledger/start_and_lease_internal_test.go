package ledger

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Start and the Lease, against the fixes of handlers before the lists at Start, View Unknown for
// a create in flight, Refusal journal entries and fences ordered by the Lease.

// lease is a Lease held by one identity at a time (Config.Lease reads it). Like client-go's
// elector it counts holder changes: taking it from another identity, or after a release,
// begins a new term.
type lease struct {
	mu          sync.Mutex
	holder      string
	transitions int64
}

func (ls *lease) take(identity string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.holder != identity {
		ls.transitions++
	}
	ls.holder = identity
}

func (ls *lease) release() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.holder = ""
}

func (ls *lease) of(identity string) func(context.Context) (LeaseTerm, error) {
	return func(context.Context) (LeaseTerm, error) {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		return LeaseTerm{Held: ls.holder == identity, Transitions: ls.transitions}, nil
	}
}

// A manager that lost its Lease and got it back without noticing writes its stale books over
// everything the manager elected in between wrote: with Config.Elected, a manager that finds
// another's authority in the account (an event, or its write's re-read) asks the Lease, and if
// it holds it, takes the fence for a deposed manager's late fence ("which wrote nothing else")
// and writes over it. But the fence may be that of a manager elected AFTER it, which kept the
// books for a while (charges, top-ups) and then let the Lease go. Every write carries absolute
// figures (the books' last written status), so the write over it puts back A's credited, spent
// and journal: B's top-up credit is gone (its PointTopUp says Applied, so it is never credited
// again; its journal entry is gone too), and so is B's charge (the task says Succeeded/Deducted).
// Before the Lease ordering, A stepped down on the first sight of another's authority.
//
// Interleaving:
//  1. A is elected and keeps the books (credited 100; task t held at 10).
//  2. A's process is paused past its Lease (the case fencing exists for: a frozen VM, a long
//     stop-the-world, a CPU-starved container). B is elected, fences the account, builds its
//     books, applies a top-up of +50 (status Applied, its entry forgotten) and charges t
//     (spent 10).
//  3. B stops gracefully (a rollout, a drained node): LeaderElectionReleaseOnCancel writes the
//     Lease with no holder.
//  4. A resumes. Its leader elector was between two renewals (renew's wait.UntilWithContext
//     sleeps RetryPeriod, 2 s, between cycles: nearly all of its time), so the next cycle starts
//     with a fresh RenewDeadline. client-go's tryAcquireOrRenew: the fast path is skipped (its
//     observed record is older than LeaseDuration), the slow path Gets the Lease, finds
//     HolderIdentity "" (B's release) and so does not wait for any lease to expire, and
//     Updates it with A's identity (LeaderTransitions+1). It returns true: A "renewed", never
//     saw itself lose the Lease, and its manager never stopped (OnStoppedLeading never ran).
//  5. A's informer brings B's writes of the account (authority B, newer): accountEvent with
//     Elected schedules a write; commit re-reads, finds authority B, asks the Lease: A holds
//     it, so it writes A's books over B's.
//
// What a user sees: credited 100 instead of 150 (a paid top-up of 50 gone, its PointTopUp
// still saying Applied), spent 0 for a task that says Succeeded, and t frozen again in A's
// books.
//
// Suggested fix (words only): the Lease alone does not order a fence against the manager
// elected after; compare the Lease's term (leaderTransitions / acquireTime at the fence)
// with the one this manager's books were built in, and step down (rebuild) when the account
// shows another authority whose term is newer than the books', or simply rebuild the books
// (fence + lists) instead of writing them over a foreign authority.
func TestAManagerThatRegainsItsLeaseDoesNotWriteOverTheManagerElectedMeanwhile(t *testing.T) {
	h := newHarness(t, 100)
	var ls lease
	ls.take("ledger-A")
	a := h.startWith(h.ctx, "ledger-A", func(cfg *Config) { cfg.Lease = ls.of("ledger-A") })
	task := h.create(a, "t", 10)
	h.feed(a, task)
	h.books(h.settle(a), 100, 0, 10)

	// 2. A paused; B elected: fence, books, a top-up and t's charge.
	ls.take("ledger-B")
	b := h.startWith(h.ctx, "ledger-B", func(cfg *Config) { cfg.Lease = ls.of("ledger-B") })
	if _, out := h.applyTopUp(b, "pay", "INVOICE-1", 50); !out.Applied {
		t.Fatalf("B's top-up: %+v", out)
	}
	h.charge(b, task)
	h.settle(b)
	h.books(h.settle(b), 150, 10, 0)

	// 3-4. B releases the Lease on its way out; A's next renewal acquires it.
	ls.release()
	ls.take("ledger-A")

	// 5. A's informer brings B's account.
	a.accountEvent(h.ctx, h.account(), false)
	// The Lease is A's again, but in a later term than its books': A's write steps down.
	waitFor(t, func() bool { return !a.Ready() })
	expectDeposed(t, a)
	got := h.account()
	if got.Status.Authority != "ledger-B" {
		t.Errorf("A wrote over B's books (authority %q)", got.Status.Authority)
	}
	st := got.Status
	if st.Credited != 150 || st.Spent != 10 {
		t.Errorf("A, back with the Lease, wrote its books over B's: credited %d spent %d frozen %d journal %+v; "+
			"want credited 150 (B's paid top-up of 50) and spent 10 (B's charge of t)", st.Credited, st.Spent, st.Frozen, st.Journal)
	}
}

// A debit refused DebitExceedsBalance is recorded as a Refusal journal entry, and the books
// remember it (b.refusals) from that entry or from the top-up's refused status. The entry is
// forgotten once the status shows the refusal; the refused PointTopUp may then be deleted (the
// admission policy lets a refused one go, and an administrator cleans up before trying again).
// A manager elected after that has neither: the journal no longer holds the entry and its list
// of top-ups no longer holds the top-up. A copy of the debit from before its refusal (its
// PointTopUp controller's cache lags the refusal's status write and the deletion) is then
// applied as a new debit once the balance covers it: the account loses the points, for a
// PointTopUp whose last status said "nothing was debited" and that no longer exists, and the
// journal entry of that debit is forgotten as "gone" at the next tidy, so nothing records it.
// docs/ledger.md, rule 6: "a copy of it from before that status, asked again once the balance
// would cover it, on this manager or a new one, is refused again, never debited".
//
// Interleaving:
//  1. Balance 30; a task holds 20 (available 10). An administrator closing the account debits
//     30 (PointTopUp close). A refuses it: the Refusal entry lands; the controller writes
//     Applied=False DebitExceedsBalance; ObserveTopUp; the next write forgets the entry.
//  2. The administrator deletes the refused top-up (allowed), and cancels the task: its hold
//     ends (balance 30, available 30).
//  3. A fails over to B (a rollout: A releases the Lease, B acquires it at once). B builds its
//     books: the account's journal is empty, the list of top-ups does not have close.
//  4. B's PointTopUp controller reconciles close from its cache, which still holds the copy
//     from before the refusal: a standby's watch that lags by a few seconds (the same lag
//     account_recreation_internal_test.go and the doc's rule 6 take as reachable), or a new pod's informer whose
//     initial list (resourceVersion "0") was answered from the watch cache of a kube-apiserver
//     of an HA control plane that lags the others. ApplyTopUp queues a debit of 30 and the
//     next write lands it. The controller's Applied status write then fails NotFound; the
//     debit's journal entry has no top-up to show it, and the next tidy (the PointAccount
//     controller calls Tidy while the journal is not empty) forgets it as "gone".
//
// Suggested fix (words only): keep the Refusal entry in the journal while its top-up exists
// is not enough (the top-up may go); either do not let a refused DebitExceedsBalance top-up be
// deleted while its refusal could be forgotten, or keep the entry until the top-up is gone AND
// refuse, at ApplyTopUp, a copy whose UID the kube-apiserver no longer has (read the top-up
// fresh from the API reader before queuing a debit, as resolveFates does).
func TestARefusedDebitDeletedAfterItsEntryWentIsNotDebitedByTheNextManager(t *testing.T) {
	h := newHarness(t, 30)
	a := h.l
	task := h.create(a, "t", 20)
	h.feed(a, task)
	h.books(h.settle(a), 30, 0, 20)

	// 1. The debit, refused; the refusal written, the entry forgotten.
	debit := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "close"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: -30, Reference: "CLOSE", Note: "account closed"}}
	must(t, k8s.Create(h.ctx, debit))
	stale := debit.DeepCopy()
	out := h.reapply(a, debit)
	if !out.Refused || out.Reason != videogenv1alpha1.ReasonDebitExceedsBalance {
		t.Fatalf("a debit of 30 with 10 available: %+v, want refused", out)
	}
	meta.SetStatusCondition(&debit.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied,
		Status: metav1.ConditionFalse, Reason: out.Reason, Message: out.Message})
	must(t, k8s.Status().Update(h.ctx, debit))
	a.ObserveTopUp(debit)
	h.booksClosed(h.settle(a), 30, 0, 20)

	// 2. The refused top-up deleted; the task cancelled.
	must(t, k8s.Delete(h.ctx, debit))
	refunded := h.writeStatus(a, task, ended(videogenv1alpha1.ChargeRefunded, videogenv1alpha1.TaskFailed, false))
	h.feed(a, refunded)
	h.booksClosed(h.settle(a), 30, 0, 0)

	// 3. B elected, its books built.
	b := h.start(h.ctx, "ledger-B")

	// 4. The stale copy from B's lagging cache.
	out, err := b.ApplyTopUp(stale)
	must(t, err)
	got := h.settle(b)
	if out.Queued || out.Applied || got.Status.Credited != 30 {
		t.Errorf("B applied a stale copy of a debit refused and deleted: %+v; account credited %d (want 30), journal %+v",
			out, got.Status.Credited, got.Status.Journal)
	}
}

// A REST create whose name is taken by a task made with kubectl a moment before (the REST
// name is derived from the Idempotency-Key, so the caller knows it) holds the name's entry with
// no UID while it runs: the kubectl task's Add event, which comes meanwhile, is left out of the
// books (observe: "the entry stays the create's"), and CreateTask, once the create fails
// AlreadyExists, reads that task to count it. If that read fails (a transient error: the
// kube-apiserver throttling, a timeout; the same conditions under which a write lands and then
// fails), the entry goes and the kubectl task is in no book. Nothing brings it back: its
// controller's View says Unknown ("the ledger's event has not come yet") and requeues every
// 200 ms without writing anything, so no event of the task ever comes again, until the
// informer's resync (controller-runtime's default SyncPeriod: 10 hours) or a hand edit. The
// tenant's task sits Pending, never admitted nor refused, for hours.
//
// Interleaving: kubectl creates "t"; REST CreateTask("t", 1) counts a pending entry with no
// UID; the informer's Add of the kubectl "t" arrives (left out); the REST create fails
// AlreadyExists; the Reader's Get of "t" fails once (429); the entry is deleted.
//
// Suggested fix (words only): when the read after AlreadyExists fails, keep a marker that the
// name has an uncounted task (or requeue the name and have the next View/reconcile read it
// from the API reader), or let View on an unknown task with no entry read it fresh and
// observe it when it is newer than listRV, instead of waiting for an event that may never come.
func TestAKubectlTaskLeftOutWhileARESTCreateOfItsNameRanIsNotUnknownForever(t *testing.T) {
	l, existing := leftOutByACreate(t, 1)
	// The controller reconciles the kubectl task over and over; nothing writes it meanwhile.
	for range 5 {
		v, err := l.View(existing)
		must(t, err)
		if v.Standing != Unknown {
			return // the books know it: the controller admits it (or refuses it)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("the kubectl task %q is Unknown to the ledger after its name's REST create failed AlreadyExists: "+
		"its controller waits for an event that never comes (no one writes the task until it is admitted)", existing.Name)
}

// Checked, holds (a pin): Start now adds its handlers before the fences and lists, each listed
// account's books locked until installed. Two accounts change under it: the harness account
// (empty, so the deletion policy lets it go) is deleted and created again (a new UID, credited
// 40) right after Start's list of accounts, so its fence meets the new account (the old copy's
// write fails, the re-read brings the new one); and an account is created in a second namespace
// (credited 30) during Start, not in the list: its Add reaches the handler while the listed
// books are locked, and its rebuild runs beside Start. Both end with books of the current
// accounts; nothing deadlocks, and the events older than the lists (the old account's copies
// and its delete, replayed to the new handlers) change nothing: a REST task is admitted and
// charged on the re-created account.
func TestAccountsReplacedOrCreatedDuringStartGetTheirBooks(t *testing.T) {
	h := newHarness(t, 0) // empty: the account-deletion policy lets it go
	other := "t-" + string(uuid.NewUUID())[:8]
	must(t, k8s.Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}))

	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	informers := managerCache(t, ctx, &videogenv1alpha1.VideoTask{}, &videogenv1alpha1.PointAccount{})
	credited := func(ns string, points int64) error {
		acct := &videogenv1alpha1.PointAccount{ObjectMeta: objectMeta(ns, videogenv1alpha1.PointAccountName)}
		if err := k8s.Create(ctx, acct); err != nil {
			return err
		}
		acct.Status.Credited, acct.Status.Balance = points, points
		return k8s.Status().Update(ctx, acct)
	}
	var once atomic.Bool
	var hookErr error
	reader := interceptor.NewClient(k8s, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if _, ok := list.(*videogenv1alpha1.PointAccountList); ok && once.CompareAndSwap(false, true) {
				hookErr = errors.Join(k8s.Delete(ctx, h.account()), credited(h.ns, 40), credited(other, 30))
			}
			return nil
		},
	})
	signer, err := NewSigner(testKey)
	must(t, err)
	l := New(Config{Client: k8s, Reader: reader, Cache: informers, Signer: signer, Identity: "ledger-2", WriteInterval: 20 * time.Millisecond})
	started := make(chan error, 1)
	go func() { started <- l.Start(ctx) }()
	waitFor(t, func() bool {
		select {
		case err := <-started:
			t.Fatalf("Start: %v", err)
		default:
		}
		return l.Ready()
	})
	must(t, hookErr)
	waitFor(t, func() bool { _, err := l.Balance(ctx, other); return err == nil })
	time.Sleep(200 * time.Millisecond) // the informer's events are delivered by now
	if f := h.figures(l); f.Credited != 40 || f.Frozen != 0 || f.Balance != 40 {
		t.Errorf("the re-created account: %+v, want credited 40, balance 40", f)
	}
	if f, err := l.Balance(ctx, other); err != nil || f.Credited != 30 || f.Balance != 30 {
		t.Errorf("the account created during Start: %+v %v, want 30", f, err)
	}
	h.books(h.settle(l), 40, 0, 0)
	task := h.create(l, "t", 10)
	h.feed(l, task)
	h.charge(l, task)
	h.books(h.settle(l), 40, 10, 0)
}

// The same, with the kube-apiserver failing the read longer than CreateTask retries it: the
// books count the kubectl task once it answers (countLater), and requeue it.
func TestAKubectlTaskLeftOutWhileTheKubeAPIServerFailsIsCountedWhenItAnswers(t *testing.T) {
	l, existing := leftOutByACreate(t, 9) // more than CreateTask's own retries
	if v, err := l.View(existing); err != nil || v.Standing != Unknown {
		t.Fatalf("while the kube-apiserver fails: %+v %v, want Unknown", v, err)
	}
	waitFor(t, func() bool { v, err := l.View(existing); return err == nil && v.Standing != Unknown })
	select {
	case ev := <-l.TaskEvents():
		if ev.Object.GetName() != existing.Name {
			t.Fatalf("requeued %s, want %s", ev.Object.GetName(), existing.Name)
		}
	default:
		t.Fatal("the task counted late was not requeued: its controller would wait 200 ms at a time for nothing")
	}
}

// leftOutByACreate makes a kubectl task "t" whose informer Add reaches the ledger while a REST
// create of its name holds the entry, and has the create's reads of the task fail failedReads
// times after it fails AlreadyExists. It returns the ledger and the kubectl task.
func leftOutByACreate(t *testing.T, failedReads int32) (*Ledger, *videogenv1alpha1.VideoTask) {
	t.Helper()
	h := newHarness(t, 100)
	existing := h.task("t")
	var failures atomic.Int32
	var l *Ledger
	l = h.startWith(h.ctx, "ledger-2", func(cfg *Config) {
		innerClient := cfg.Client
		cfg.Client = interceptor.NewClient(withWatch{innerClient}, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if task, ok := obj.(*videogenv1alpha1.VideoTask); ok && task.Name == existing.Name {
					h.feed(l, existing) // the informer's Add of the kubectl task, while the create runs
					failures.Store(failedReads)
				}
				return c.Create(ctx, obj, opts...)
			},
		})
		cfg.Reader = interceptor.NewClient(k8s, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*videogenv1alpha1.VideoTask); ok && failures.Add(-1) >= 0 {
					return apierrors.NewTooManyRequests("the kube-apiserver is throttling", 1)
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
	})
	must(t, k8s.Create(h.ctx, existing)) // kubectl, after the books were built; its event not delivered yet
	if _, err := l.CreateTask(h.ctx, h.task("t"), 1); !errors.Is(err, ErrTaskExists) {
		t.Fatalf("the REST create of a name in use: %v, want ErrTaskExists", err)
	}
	if failures.Load() >= failedReads {
		t.Fatal("the read after AlreadyExists did not happen")
	}
	return l, existing
}

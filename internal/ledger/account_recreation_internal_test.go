package ledger

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// An account deleted and created again: late answers, events and top-ups of the old account.

// stalling wraps a ledger's client so that the next account status write, once armed, lands and
// then waits for release before it answers (a slow answer: the kube-apiserver committed the
// write and its response is late on the wire).
type stalling struct {
	armed    atomic.Bool
	landed   chan struct{}
	released chan struct{}
}

func newStalling() *stalling {
	return &stalling{landed: make(chan struct{}), released: make(chan struct{})}
}

func (s *stalling) wrap(cfg *Config) {
	inner := cfg.Client
	cfg.Client = interceptor.NewClient(withWatch{inner}, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			err := c.SubResource(sub).Update(ctx, obj, opts...)
			if _, ok := obj.(*videogenv1alpha1.PointAccount); ok && err == nil && s.armed.CompareAndSwap(true, false) {
				close(s.landed)
				<-s.released
			}
			return err
		},
	})
}

// stepUntilLanded steps the writer's clock until the armed write of stall has landed (its answer
// then waits for release); it reports whether it did.
func (s *stepped) stepUntilLanded(stall *stalling) bool {
	return s.stepUntil(func() bool {
		select {
		case <-stall.landed:
			return true
		default:
			return false
		}
	})
}

// withFinalizer puts the ledger's finalizer on the namespace's account, as the PointAccount
// controller does first thing, and returns the account as written.
func (h *harness) withFinalizer() *videogenv1alpha1.PointAccount {
	h.t.Helper()
	var acct *videogenv1alpha1.PointAccount
	must(h.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		acct = h.account()
		acct.Finalizers = []string{videogenv1alpha1.FinalizerLedger}
		return k8s.Update(h.ctx, acct)
	}))
	return acct
}

// stepUntil steps the writer's clock until cond holds, for at most a few seconds of real time;
// it reports whether cond came to hold.
func (s *stepped) stepUntil(cond func() bool) bool {
	for range 150 {
		if cond() {
			return true
		}
		if s.clk.HasWaiters() {
			s.clk.Step(time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

// The answer of an account write that comes after the account was closed, deleted and created
// again is brought into the new account's books: landed sets b.account to the copy it wrote,
// the deleted account's, over the new account install put there. It checks neither the UID nor
// whether the books were rebuilt meanwhile (build takes the account's lock while the writer's
// commit is on its way; load keeps the writer's state). From then on the books of the new
// account are the deleted one's:
//
//   - accepting() reads the deleted copy's deletionTimestamp: every REST create of the new
//     account is refused ErrAccountClosing (REST: 403 account_closing), and every kubectl task is rejected for good,
//     Failed AccountClosing ("the account is being deleted");
//   - every write plans from the deleted copy: its compare-and-swap conflicts, the re-read finds
//     another UID ("the account was replaced by a new one"), and the writer retries that each
//     interval, forever: a top-up for the new account is never credited (the customer paid; the
//     top-up stays Queued; the balance stays 0, so a create is refused 402 after the account
//     is accepted again);
//   - the new account's own events do not repair it when they came before the late answer
//     (its creation, the finalizer the PointAccount controller adds, the ledger's own fence
//     write): only a later edit of the account or a restart of the manager rebuilds the books.
//
// Interleaving (each step reachable):
//  1. The account is empty (balance, holds, frozen 0: the admission policy lets it be deleted)
//     and carries the finalizer. An administrator deletes it. The ledger's informer delivers
//     the deletionTimestamp: the books adopt it and a write is due (the Closing condition).
//  2. The writer writes it; it lands, and its answer is slow (a congested connection to the
//     kube-apiserver: the commit is done, the response is late; controller-runtime's client has
//     no per-request timeout). The writer holds no lock meanwhile.
//  3. The PointAccount controller reconciles the account (its event: the write landed): the
//     books are empty (Closable: nothing queued, the status last written is 0), so it removes
//     the finalizer (a patch with the account's current resourceVersion: it lands). The account
//     is gone; the ledger's informer delivers the delete: the books are emptied (load).
//  4. The administrator creates the account again (same name, new UID): a script that
//     re-creates it, `kubectl delete --wait && kubectl apply`. The PointAccount controller adds
//     its finalizer; the ledger's informer delivers the Add: rebuild builds the new account's
//     books (its fence write lands, its events come; b.writing, so only seenRV moves).
//  5. The slow answer of step 2 arrives, successful: landed puts the deleted account in the
//     books.
//  6. A PointTopUp of +50 for the new account; a REST create of 10 after it.
func TestALateAnswerOfADeletedAccountsWriteDoesNotTakeOverItsSuccessor(t *testing.T) {
	h := newHarness(t, 0)
	h.withFinalizer()
	stall := newStalling()
	s := h.stepped("ledger-1", stall.wrap)
	b := s.l.book(h.ns)

	// 1. Deleted while empty; the ledger learns it.
	must(t, k8s.Delete(h.ctx, h.account()))
	deleting := h.account()
	stall.armed.Store(true)
	s.l.accountEvent(h.ctx, deleting.DeepCopy(), false)
	// 2. The Closing write lands; its answer waits.
	if !s.stepUntilLanded(stall) {
		t.Fatal("the Closing write was not sent")
	}
	// 3. The controller finds the books closable and removes the finalizer; the delete comes.
	must(t, s.l.Closable(h.ns))
	closing := h.account()
	if c := closing.Status.Conditions; len(c) == 0 || c[0].Reason != videogenv1alpha1.ReasonClosing {
		t.Fatalf("conditions %+v: want the Closing write landed", c)
	}
	closing.Finalizers = nil
	must(t, k8s.Update(h.ctx, closing)) // with its resourceVersion: the optimistic lock of the patch
	if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(closing), &videogenv1alpha1.PointAccount{}); !isNotFound(err) {
		t.Fatalf("the closed account: %v, want it gone", err)
	}
	s.l.accountEvent(h.ctx, closing.DeepCopy(), true)

	// 4. Created again; the controller adds its finalizer; the ledger builds its books.
	second := &videogenv1alpha1.PointAccount{ObjectMeta: objectMeta(h.ns, videogenv1alpha1.PointAccountName)}
	must(t, k8s.Create(h.ctx, second))
	added := second.DeepCopy()
	second = h.withFinalizer()
	s.l.accountEvent(h.ctx, added, false)
	waitFor(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return !b.building && b.account != nil && b.account.UID == second.UID
	})
	s.l.accountEvent(h.ctx, second.DeepCopy(), false) // the finalizer's event
	s.l.accountEvent(h.ctx, h.account(), false)       // the fence write's event

	// 5. The late answer.
	close(stall.released)
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return !b.writing })

	b.mu.Lock()
	booksUID := b.account.UID
	b.mu.Unlock()
	if booksUID != second.UID {
		t.Errorf("the books keep account UID %s after the late answer, the deleted account's; the account is %s", booksUID, second.UID)
	}
	// 6. The new account takes tasks and top-ups.
	var short *InsufficientBalanceError
	if _, err := s.l.CreateTask(h.ctx, h.task("r0"), 1); !errors.As(err, &short) {
		t.Errorf("a create on the re-created account, nothing credited yet: %v, want 402 (the account is not being deleted)", err)
	}
	tu := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "pay-new"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 50, Reference: "PAY-NEW"}}
	must(t, k8s.Create(h.ctx, tu))
	var out TopUpOutcome
	credited := s.stepUntil(func() bool {
		var err error
		out, err = s.l.ApplyTopUp(tu)
		must(t, err)
		return out.Applied
	})
	if !credited {
		a := h.account()
		t.Fatalf("a top-up of the re-created account is never credited: %+v; account credited %d, journal %d entries",
			out, a.Status.Credited, len(a.Status.Journal))
	}
	if out.AccountUID != string(second.UID) {
		t.Fatalf("applied to account %s, want the re-created one %s", out.AccountUID, second.UID)
	}
	h.books(s.settle(), 50, 0, 0)
	if _, err := s.l.CreateTask(h.ctx, h.task("r1"), 10); err != nil {
		t.Fatalf("a create of 10 on the re-created account with 50 credited: %v", err)
	}
}

// closeAccount deletes the namespace's empty account as an administrator does, and lets it go as
// the PointAccount controller does once the ledger says it is closable: the finalizer's removal
// carries the account's resourceVersion (the optimistic lock of the controller's patch). The
// informer's events of both are delivered to l. It returns the account's last copy.
func (h *harness) closeAccount(l *Ledger) *videogenv1alpha1.PointAccount {
	h.t.Helper()
	must(h.t, k8s.Delete(h.ctx, h.account()))
	l.accountEvent(h.ctx, h.account(), false)
	h.settle(l) // the Closing condition
	waitFor(h.t, func() bool { return l.Closable(h.ns) == nil })
	var acct *videogenv1alpha1.PointAccount
	must(h.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		acct = h.account()
		acct.Finalizers = nil
		return k8s.Update(h.ctx, acct)
	}))
	l.accountEvent(h.ctx, acct.DeepCopy(), true)
	return acct
}

// recreate creates the namespace's account again (same name, a new UID), puts the finalizer on
// it, delivers its Add to l and waits for its books.
func (h *harness) recreate(l *Ledger) *videogenv1alpha1.PointAccount {
	h.t.Helper()
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: objectMeta(h.ns, videogenv1alpha1.PointAccountName)}
	must(h.t, k8s.Create(h.ctx, acct))
	added := acct.DeepCopy()
	acct = h.withFinalizer()
	l.accountEvent(h.ctx, added, false)
	b := l.book(h.ns)
	waitFor(h.t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return !b.building && b.account != nil && b.account.UID == acct.UID
	})
	l.accountEvent(h.ctx, acct.DeepCopy(), false)
	return acct
}

// applyTopUp creates a top-up and has l apply it, as the PointTopUp controller does: the ledger's
// outcome, and, once applied, its status written and observed.
func (h *harness) applyTopUp(l *Ledger, name, reference string, amount int64) (*videogenv1alpha1.PointTopUp, TopUpOutcome) {
	h.t.Helper()
	tu := h.topUp(name, reference, amount)
	return tu, h.reapply(l, tu)
}

// reapply has l apply an existing top-up (a copy, perhaps stale), as applyTopUp does.
func (h *harness) reapply(l *Ledger, tu *videogenv1alpha1.PointTopUp) TopUpOutcome {
	h.t.Helper()
	out := h.outcome(l, tu)
	if out.Applied {
		tu.Status.AppliedAt, tu.Status.AccountUID, tu.Status.BalanceAfter = ptrNow(), types.UID(out.AccountUID), &out.BalanceAfter
		must(h.t, k8s.Status().Update(h.ctx, tu))
		l.ObserveTopUp(tu)
	}
	return out
}

// Checked, holds (a pin): the task informer runs behind the account informer, so the events of
// the deleted account's tasks can come after the re-created account's books were built from a
// fresh list. None of them counts on the new account: the closed task is older than the list
// (listRV), and once its name is taken again by a task of the new account, its copies are of an
// earlier task (its UID) and older than the new one's (its resourceVersion); its delete event
// names the other UID. No hold is brought back, nothing charged twice, nothing freed.
//
// Interleaving: account 1 (credited 10): REST task t held at 10, charged, Deducted, closed
// (spent 10, balance 0); account 1 deleted and let go; account 2 created and built; top-up +30;
// the lagging task informer delivers t's copies (held, Queued/Frozen, Deducted) and its delete;
// t deleted (the finished-task collector) and the name t created again on account 2 (held at
// 10); t's old copies and delete event delivered once more.
func TestTheDeletedAccountsLateTaskEventsCountNothingOnItsSuccessor(t *testing.T) {
	h := newHarness(t, 10)
	h.withFinalizer()
	l := h.l
	l.accountEvent(h.ctx, h.account(), false)
	task := h.create(l, "t", 10)
	h.feed(l, task)
	cost := int64(10)
	queued := h.writeStatus(l, task, func(st *videogenv1alpha1.VideoTaskStatus) {
		st.Phase, st.Charge, st.Cost = videogenv1alpha1.TaskQueued, videogenv1alpha1.ChargeFrozen, &cost
	})
	h.charge(l, queued)
	done := h.writeStatus(l, queued, ended(videogenv1alpha1.ChargeDeducted, videogenv1alpha1.TaskSucceeded, false))
	closed := h.writeStatus(l, done, func(st *videogenv1alpha1.VideoTaskStatus) { st.Closed = true })
	h.feedDelete(l, closed)
	h.booksClosed(h.settle(l), 10, 10, 0)

	first := h.closeAccount(l)
	second := h.recreate(l)
	if second.UID == first.UID {
		t.Fatal("the account was not re-created")
	}
	if _, out := h.applyTopUp(l, "pay-2", "PAY-2", 30); !out.Applied || out.AccountUID != string(second.UID) {
		t.Fatalf("a top-up of the re-created account: %+v", out)
	}
	late := func() {
		for _, c := range []*videogenv1alpha1.VideoTask{task, queued, done} {
			h.feed(l, c)
			l.Observe(c) // a controller's copy, as late
		}
		h.feedDelete(l, closed)
	}
	late()
	h.booksClosed(h.settle(l), 30, 0, 0)
	if f := h.figures(l); f.Holds != 0 || f.Frozen != 0 || f.Balance != 30 {
		t.Fatalf("figures after the deleted account's late events: %+v", f)
	}

	must(t, k8s.Delete(h.ctx, closed))
	again := h.create(l, "t", 10)
	h.feed(l, again)
	late()
	h.books(h.settle(l), 30, 0, 10)
	if f := h.figures(l); f.Holds != 1 || f.Frozen != 10 || f.Balance != 20 {
		t.Fatalf("figures with t held again on the new account: %+v", f)
	}
	if v, err := l.View(again); err != nil || v.Standing != Held || v.Price != 10 {
		t.Fatalf("the new t: %+v %v, want Held at 10", v, err)
	}
}

// Checked, holds (a pin): the PointAccount controller removes the finalizer after Closable said
// the books are empty, and a top-up is queued in between (top-ups still apply to a closing
// account). If its write landed first, the finalizer's removal would conflict (it carries the
// account's resourceVersion) and the account would stay with the credit. Here the removal lands
// first: the write finds the account gone, the delete empties the books, and the top-up, still
// not applied, is credited once, to the account created again; a second top-up with its
// reference is refused, and a new manager built from the lists agrees.
//
// Interleaving: account 1 empty, deleted; Closable; ApplyTopUp(+50, PAY-LATE) queued (its write
// waits for the writer's interval); the finalizer's removal lands; the writer's write finds the
// account gone; the delete event; ApplyTopUp again: no account; account 2 created and built;
// ApplyTopUp: credited to account 2; PAY-LATE again: refused; manager ledger-2 built.
func TestATopUpQueuedAsTheFinalizerGoesIsCreditedOnceToTheNextAccount(t *testing.T) {
	h := newHarness(t, 0)
	h.withFinalizer()
	s := h.stepped("ledger-1", nil)
	l := s.l
	must(t, k8s.Delete(h.ctx, h.account()))
	l.accountEvent(h.ctx, h.account(), false)
	s.settle()
	must(t, l.Closable(h.ns))

	late := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "pay-late"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 50, Reference: "PAY-LATE", Note: "test"}}
	must(t, k8s.Create(h.ctx, late))
	// A credit to a closing account waits for the next one (nothing queued: the
	// finalizer's removal cannot race a write of it; nor can one made after a
	// deletion the books have not seen yet, as ApplyTopUp reads the account).
	if out, err := l.ApplyTopUp(late); !errors.Is(err, ErrAccountClosing) {
		t.Fatalf("a top-up of a closing account: %+v %v, want ErrAccountClosing (it waits for the next account)", out, err)
	}
	var acct *videogenv1alpha1.PointAccount
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		acct = h.account()
		acct.Finalizers = nil
		return k8s.Update(h.ctx, acct)
	}))
	l.accountEvent(h.ctx, acct.DeepCopy(), true)
	if _, err := l.ApplyTopUp(late); !errors.Is(err, ErrAccountNotFound) {
		t.Fatalf("the top-up once the account is gone: %v, want ErrAccountNotFound", err)
	}
	if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(acct), &videogenv1alpha1.PointAccount{}); !isNotFound(err) {
		t.Fatalf("the closed account: %v, want it gone", err)
	}

	second := h.recreate(l)
	var out TopUpOutcome
	if !s.stepUntil(func() bool {
		var err error
		out, err = l.ApplyTopUp(late)
		must(t, err)
		return out.Applied
	}) {
		t.Fatalf("the top-up on the re-created account: %+v", out)
	}
	if out.AccountUID != string(second.UID) || out.BalanceAfter != 50 {
		t.Fatalf("the top-up on the re-created account: %+v", out)
	}
	late.Status.AppliedAt, late.Status.AccountUID = ptrNow(), second.UID
	must(t, k8s.Status().Update(h.ctx, late))
	l.ObserveTopUp(late)
	again := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "pay-late-again"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 50, Reference: "PAY-LATE", Note: "test"}}
	must(t, k8s.Create(h.ctx, again))
	if out, err := l.ApplyTopUp(again); err != nil || !out.Refused {
		t.Fatalf("a second top-up with the reference: %+v %v, want refused", out, err)
	}
	h.booksClosed(s.settle(), 50, 0, 0)
	l2 := h.start(h.ctx, "ledger-2")
	if out, err := l2.ApplyTopUp(again); err != nil || !out.Refused {
		t.Fatalf("a new manager: %+v %v, want refused", out, err)
	}
	h.booksClosed(h.settle(l2), 50, 0, 0)
}

// A debit refused DebitExceedsBalance is refused "for good" (its status says "nothing was
// debited", and the PointTopUp controller never asks again once its copy shows the refusal), but
// the books remember only the references of applied or queued top-ups, not refusals. A copy of
// the debit from before its refusal was written (the controller's cache lags its own status
// write) asked again once the balance covers it is queued and debited. The controller's Applied
// status write from that stale copy then conflicts, and its next reconcile sees the refusal and
// stops: the PointTopUp says Refused, nothing debited; the account has the points debited, and
// the debit's journal entry can never be forgotten (its top-up never shows appliedAt: the fate
// stays unknown), so the account, once deleted, can never go. An administrator who then deletes
// the refused top-up (the admission policy lets a refused one go) makes the entry "gone": the
// account closes with a debit that no PointTopUp records.
//
// This is the close of an account, step by step (each reachable):
//  1. Balance 30; a task holds 20 (available 10). To close the account an administrator debits
//     what the account shows: PointTopUp close (-30, CLOSE). The ledger refuses it (10 available)
//     and the controller writes the refusal.
//  2. The administrator cancels the task: its hold ends (Refunded); the account's next write
//     shows balance 30. That write's event wakes every top-up of the namespace whose cached copy
//     is neither applied nor refused (PointTopUpReconciler.pendingTopUps): close's cached copy
//     is still the one from before its refusal (the same key was marked dirty while step 1's
//     reconcile ran, so the workqueue hands it out again at once; the refusal's watch event has
//     not reached the cache yet).
//  3. ApplyTopUp(that copy): queued, and debited with the next write.
//  4. The controller's Applied write from the stale copy conflicts; the next reconcile reads the
//     refusal and stops. The administrator deletes the account (its status shows 0 everywhere, so
//     the admission policy lets it), and the ledger is asked whether it may go.
func TestARefusedDebitIsNotDebitedFromAStaleCopy(t *testing.T) {
	h := newHarness(t, 30)
	h.withFinalizer()
	l := h.l
	l.accountEvent(h.ctx, h.account(), false)
	task := h.create(l, "t", 20)
	h.feed(l, task)
	h.books(h.settle(l), 30, 0, 20)

	// 1. The debit, refused; the refusal written.
	debit := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "close"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: -30, Reference: "CLOSE", Note: "account closed"}}
	must(t, k8s.Create(h.ctx, debit))
	stale := debit.DeepCopy()
	out, err := l.ApplyTopUp(debit)
	must(t, err)
	if !out.Queued {
		t.Fatalf("a debit of 30 with 10 available: %+v, want its refusal queued for the account's write", out)
	}
	h.settle(l)
	out, err = l.ApplyTopUp(debit) // the ledger wakes the top-up once the refusal is written
	must(t, err)
	if !out.Refused || out.Reason != videogenv1alpha1.ReasonDebitExceedsBalance {
		t.Fatalf("a debit of 30 with 10 available, its refusal written: %+v, want refused", out)
	}
	meta.SetStatusCondition(&debit.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied,
		Status: metav1.ConditionFalse, Reason: out.Reason, Message: out.Message})
	must(t, k8s.Status().Update(h.ctx, debit))

	// 2. The task cancelled: its hold ends.
	refunded := h.writeStatus(l, task, ended(videogenv1alpha1.ChargeRefunded, videogenv1alpha1.TaskFailed, false))
	h.feed(l, refunded)
	h.books(h.settle(l), 30, 0, 0)

	// 3. The stale copy asked again.
	out, err = l.ApplyTopUp(stale)
	must(t, err)
	if !out.Refused {
		t.Errorf("a stale copy of a debit refused DebitExceedsBalance: %+v; its status says nothing was debited", out)
	}
	a := h.settle(l)
	// 4. The Applied write from the stale copy conflicts; the account is deleted.
	if out.Queued || out.Applied {
		stale.Status.AppliedAt = ptrNow()
		if err := k8s.Status().Update(h.ctx, stale); !apierrors.IsConflict(err) {
			t.Fatalf("the Applied write from the stale copy: %v, want a conflict", err)
		}
	}
	if out.Refused {
		// Not debited. The refusal's journal entry goes once its status is seen (the
		// controller's next reconcile), and the books close with the 30 points still there.
		l.ObserveTopUp(debit)
		h.booksClosed(h.settle(l), 30, 0, 0)
		return
	}
	must(t, k8s.Delete(h.ctx, h.account()))
	l.accountEvent(h.ctx, h.account(), false)
	for range 3 {
		l.Tidy(h.ns)
		a = h.settle(l)
	}
	if a.Status.Credited-a.Status.Spent == 30 {
		return // not debited: the administrator debits again, with a new top-up
	}
	t.Errorf("the account after its debit was refused: credited %d spent %d, 30 points debited; journal %+v; closable: %v",
		a.Status.Credited, a.Status.Spent, a.Status.Journal, l.Closable(h.ns))
	// The refused top-up may be deleted (the admission policy lets a refused one go): the entry
	// is forgotten, the account goes, and no PointTopUp records the 30 points it lost.
	must(t, k8s.Delete(h.ctx, debit))
	for range 3 {
		l.Tidy(h.ns)
		a = h.settle(l)
	}
	if err := l.Closable(h.ns); err == nil {
		t.Fatalf("the account closes with 30 points debited (credited %d, spent 0) by a PointTopUp that said Refused and is gone",
			a.Status.Credited)
	}
}

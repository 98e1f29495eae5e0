package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// The first double charge: a task ends in one write while the informer still shows its
// old Pending copy, and another admission runs meanwhile. The books know the newer copy (their
// own write), so the old one changes nothing, and a charge is never made twice.
func TestALaggingInformerCannotBringBackAChargedTask(t *testing.T) {
	h := newHarness(t, 100)
	old := h.create(h.l, "y", 10) // the copy the informer will deliver late
	h.charge(h.l, old)
	done := h.writeStatus(h.l, old, ended(videogenv1alpha1.ChargeDeducted, videogenv1alpha1.TaskSucceeded, true))
	h.settle(h.l)

	h.feed(h.l, old) // the lagging informer's Add of the Pending copy
	if _, err := h.l.Charge(old, &videogenv1alpha1.TaskResult{URL: "x"}); !errors.Is(err, ErrSettled) {
		t.Fatalf("charging the stale copy again: %v, want ErrSettled", err)
	}
	if v, _ := h.l.View(old); !v.Stale {
		t.Fatalf("the stale copy is not seen as stale: %+v", v)
	}
	h.create(h.l, "x", 10)  // another admission while the informer lags
	h.feed(h.l, done)       // the informer catches up
	h.feedDelete(h.l, done) // and the task leaves the open tasks' cache (closed)
	// A reconcile still holding the old copy: the books do not take it back.
	if v, _ := h.l.View(old); v.Standing != Unknown && !v.Stale {
		t.Fatalf("a closed task came back into the books: %+v", v)
	}
	if _, err := h.l.Charge(old, &videogenv1alpha1.TaskResult{URL: "x"}); !errors.Is(err, ErrSettled) {
		t.Fatalf("charging the closed task: %v, want ErrSettled", err)
	}
	h.books(h.settle(h.l), 100, 10, 10)
	if f := h.figures(h.l); f.Frozen != 10 || f.Holds != 1 {
		t.Fatalf("figures %+v: want only x frozen", f)
	}
}

// The second double charge: the charge's account write lands but reports an error. The
// retry finds the journal entry in the account and adds nothing.
func TestAChargeWhoseWriteLandsButFailsIsCountedOnce(t *testing.T) {
	h := newHarness(t, 100)
	task := h.create(h.l, "t", 10)
	h.faults.accountUpdates.Store(2) // the next two account writes land and report an error
	h.charge(h.l, task)
	a := h.settle(h.l)
	h.books(a, 100, 10, 0)
	if len(a.Status.Journal) != 1 || a.Status.Journal[0].UID != task.UID {
		t.Fatalf("journal %+v: want one entry for the task", a.Status.Journal)
	}
	// The task's status shows the charge: its entry goes, the points stay spent.
	h.writeStatus(h.l, task, ended(videogenv1alpha1.ChargeDeducted, videogenv1alpha1.TaskSucceeded, true))
	a = h.settle(h.l)
	h.books(a, 100, 10, 0)
	if len(a.Status.Journal) != 0 {
		t.Fatalf("journal %+v: want it empty once the task shows Deducted", a.Status.Journal)
	}
}

// A create that lands but reports an error is found by the ledger's look: one hold.
func TestACreateThatLandsButFailsHoldsOnce(t *testing.T) {
	h := newHarness(t, 100)
	h.faults.creates.Store(1)
	task, err := h.l.CreateTask(h.ctx, h.task("t"), 30)
	if err != nil {
		t.Fatalf("the create landed, so the ledger should say so: %v", err)
	}
	if _, ok := h.l.cfg.Signer.Admitted(task); !ok {
		t.Fatal("the task found has no valid admission")
	}
	h.feed(h.l, task)
	if f := h.figures(h.l); f.Frozen != 30 || f.Balance != 70 {
		t.Fatalf("figures %+v: want 30 frozen once", f)
	}
	if _, err := h.l.CreateTask(h.ctx, h.task("t"), 30); !errors.Is(err, ErrTaskExists) {
		t.Fatalf("a second create of the same name: %v, want ErrTaskExists", err)
	}
}

// 402 is exact: concurrent admissions on an account that affords k of them admit exactly k,
// and a balance read right after a create shows its freeze.
func TestAdmissionIsExactUnderConcurrency(t *testing.T) {
	h := newHarness(t, 130)
	var admitted, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := h.l.CreateTask(h.ctx, h.task("c"+string(rune('a'+i%26))+string(rune('a'+i/26))), 10)
			var short *InsufficientBalanceError
			switch {
			case err == nil:
				admitted.Add(1)
			case errors.As(err, &short):
				refused.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 13 || refused.Load() != 27 {
		t.Fatalf("admitted %d, refused %d; want 13 and 27", admitted.Load(), refused.Load())
	}
	f := h.figures(h.l)
	if f.Frozen != 130 || f.Balance != 0 || f.Holds != 13 {
		t.Fatalf("figures %+v", f)
	}
	h.books(h.settle(h.l), 130, 0, 130)
}

// A hold the books did not count (a create of a manager that lost its election, landing after
// the new one built its books) is counted if the balance covers it, and overdrawn otherwise.
func TestAHoldTheBooksDidNotMakeIsCountedOnlyIfItFits(t *testing.T) {
	h := newHarness(t, 25)
	old := h.l
	late := h.create(old, "late", 10) // admitted by the old manager
	// A new manager builds its books; the old one's create of "later" lands after that.
	h.l = h.start(h.ctx, "ledger-2")
	signer := old.cfg.Signer
	later := h.task("later")
	signer.Sign(later, 20)
	must(t, k8s.Create(h.ctx, later))
	h.feed(h.l, late)
	h.feed(h.l, later)
	if v, _ := h.l.View(late); v.Standing != Held {
		t.Fatalf("the task in the books when they were built: %+v, want Held", v)
	}
	if v, _ := h.l.View(later); v.Standing != Overdrawn {
		t.Fatalf("the late create that does not fit: %+v, want Overdrawn", v)
	}
	if f := h.figures(h.l); f.Frozen != 10 || f.Balance != 15 {
		t.Fatalf("figures %+v: the overdrawn task must hold nothing", f)
	}
	// A forged admission (someone who may create tasks, but has no key) is no admission.
	forged := h.task("forged")
	forged.Annotations = map[string]string{videogenv1alpha1.AnnotationAdmission: "1:bm90LWEtc2lnbmF0dXJl"}
	must(t, k8s.Create(h.ctx, forged))
	h.feed(h.l, forged)
	if v, _ := h.l.View(forged); v.Standing != Unadmitted {
		t.Fatalf("a forged admission: %+v, want Unadmitted", v)
	}
}

// A new manager writes its name into the account before anything else; the old one's writes
// then fail, and it stops deciding for the account.
func TestTheFenceStopsTheOldManager(t *testing.T) {
	h := newHarness(t, 100)
	old := h.l
	task := h.create(old, "t", 10)
	h.settle(old)
	h.l = h.start(h.ctx, "ledger-2")
	if a := h.account(); a.Status.Authority != "ledger-2" {
		t.Fatalf("authority %q, want ledger-2", a.Status.Authority)
	}
	if _, err := old.Charge(task, &videogenv1alpha1.TaskResult{URL: "x"}); err != nil {
		t.Fatal(err)
	}
	b := old.book(h.ns)
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.fenced })
	if old.Ready() {
		t.Fatal("the fenced ledger still says it is ready")
	}
	expectDeposed(t, old)
	if a := h.account(); a.Status.Spent != 0 || len(a.Status.Journal) != 0 {
		t.Fatalf("the old manager's charge landed after the fence: %+v", a.Status)
	}
	// The new manager charges it, once.
	h.feed(h.l, task)
	h.charge(h.l, task)
	h.books(h.settle(h.l), 100, 10, 0)
}

// A crash between the charge's account write and the task's status: the new manager's books
// find the charge in the journal and finish the task from its result, without a second charge.
func TestAChargeInTheJournalSurvivesACrash(t *testing.T) {
	h := newHarness(t, 100)
	task := h.create(h.l, "t", 10)
	h.charge(h.l, task)
	h.books(h.settle(h.l), 100, 10, 0) // the write that charges it ends its hold (every write is checked)
	h.l = h.start(h.ctx, "ledger-2")   // the manager died before writing the task's status
	v, err := h.l.View(task)
	must(t, err)
	if v.Standing != Charged || v.Result == nil || v.Result.URL != "https://media.example/out/t.mp4" {
		t.Fatalf("view %+v: want Charged with the recorded result", v)
	}
	if done, err := h.l.Charge(task, v.Result); !done || err != nil {
		t.Fatalf("charging again: %v %v, want done without a second charge", done, err)
	}
	h.writeStatus(h.l, task, ended(videogenv1alpha1.ChargeDeducted, videogenv1alpha1.TaskSucceeded, true))
	a := h.settle(h.l)
	h.booksClosed(a, 100, 10, 0)
}

// An earlier manager's refund that lands after a new one charged the task: the task says
// Refunded, so its charge is given back when the entry is forgotten.
func TestAChargeWhoseTaskEndsRefundedIsGivenBack(t *testing.T) {
	h := newHarness(t, 100)
	task := h.create(h.l, "t", 10)
	h.charge(h.l, task)
	h.settle(h.l)
	h.writeStatus(h.l, task, ended(videogenv1alpha1.ChargeRefunded, videogenv1alpha1.TaskFailed, false))
	h.books(h.settle(h.l), 100, 0, 0)
}

// Deleting a task ends its hold (a refund); a charge already in the journal stays spent.
func TestDeletedTasks(t *testing.T) {
	h := newHarness(t, 100)
	held := h.create(h.l, "held", 10)
	charged := h.create(h.l, "charged", 20)
	h.charge(h.l, charged)
	h.settle(h.l)
	for _, task := range []*videogenv1alpha1.VideoTask{held, charged} {
		must(t, k8s.Delete(h.ctx, task))
		h.feedDelete(h.l, task)
	}
	a := h.settle(h.l)
	h.books(a, 100, 20, 0)
	if len(a.Status.Journal) != 0 {
		t.Fatalf("journal %+v: a deleted task's entry goes, its charge stays", a.Status.Journal)
	}
}

// A kubectl task: Admit counts it before its status write; a write that certainly failed is
// taken back, and a newer copy without the admission means it did not land.
func TestAdmitOfATaskMadeWithKubectl(t *testing.T) {
	h := newHarness(t, 15)
	task := h.task("k")
	must(t, k8s.Create(h.ctx, task))
	if v, _ := h.l.View(task); v.Standing != Unknown {
		t.Fatalf("before its event: %+v, want Unknown", v)
	}
	h.feed(h.l, task)
	must(t, admit(h.l, task, 10))
	must(t, admit(h.l, task, 10)) // again: counted once
	if f := h.figures(h.l); f.Frozen != 10 {
		t.Fatalf("figures %+v", f)
	}
	var short *InsufficientBalanceError
	other := h.task("k2")
	must(t, k8s.Create(h.ctx, other))
	h.feed(h.l, other)
	// Not ready while the first admission's account write is under way (a credit could be
	// landing): the refusal comes once it has answered.
	err := admitWhenReady(h, other, 10)
	if !errors.As(err, &short) || short.Available != 5 {
		t.Fatalf("a second admission beyond the balance: %v", err)
	}
	// Someone annotates the task before the status write: the write conflicts, and the newer
	// copy the informer brings has no admission: the hold is taken back.
	patched := task.DeepCopy()
	patched.Annotations = map[string]string{"note": "x"}
	must(t, k8s.Update(h.ctx, patched))
	h.feed(h.l, patched)
	if f := h.figures(h.l); f.Frozen != 0 {
		t.Fatalf("figures %+v: the admission that could not land still holds", f)
	}
}

// Top-ups: credited once (even when the write lands but fails), a second top-up with the same
// reference refused, a debit beyond the balance refused.
func TestTopUps(t *testing.T) {
	h := newHarness(t, 0)
	topUp := h.topUp
	apply := func(tu *videogenv1alpha1.PointTopUp) TopUpOutcome { return h.outcome(h.l, tu) }
	h.faults.accountUpdates.Store(1)
	first := topUp("first", "INV-1", 100)
	if out := apply(first); !out.Applied || out.BalanceAfter != 100 {
		t.Fatalf("first top-up: %+v", out)
	}
	again := topUp("again", "INV-1", 100)
	if out := apply(again); !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference ||
		!strings.Contains(out.Message, `reference "INV-1" was already applied to this account by PointTopUp first`) {
		t.Fatalf("a second top-up with the same reference: %+v", out)
	}
	debit := topUp("debit", "CORR-1", -150)
	if out := apply(debit); !out.Refused || out.Reason != videogenv1alpha1.ReasonDebitExceedsBalance {
		t.Fatalf("a debit beyond the balance: %+v", out)
	}
	fine := topUp("fine", "CORR-2", -40)
	if out := apply(fine); !out.Applied || out.BalanceAfter != 60 {
		t.Fatalf("a debit: %+v", out)
	}
	a := h.settle(h.l)
	h.books(a, 60, 0, 0)
	// Once a top-up's status shows it, its journal entry goes; a copy from before that status
	// (a cache that lags) must not credit it again.
	stale := first.DeepCopy()
	first.Status.AppliedAt, first.Status.AccountUID = ptrNow(), a.UID
	must(t, k8s.Status().Update(h.ctx, first))
	h.l.ObserveTopUp(first)
	h.settle(h.l)
	if out, err := h.l.ApplyTopUp(stale); err != nil || !out.AlreadyApplied {
		t.Fatalf("the stale copy of an applied top-up: %+v %v, want AlreadyApplied", out, err)
	}
	h.books(h.settle(h.l), 60, 0, 0)
}

// A deleted account takes no new task and goes only when empty: no hold, no balance, nothing
// in its journal. (The admission policy refuses the deletion of an account whose status shows
// points, so the books must hold the rest: here a status edited by hand to show nothing, which
// the books do not believe.) A credit to it waits for the next account: it would
// only keep the account from closing.
func TestAClosingAccountGoesOnlyWhenEmpty(t *testing.T) {
	h := newHarness(t, 30)
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		acct := h.account()
		acct.Finalizers = []string{videogenv1alpha1.FinalizerLedger}
		return k8s.Update(h.ctx, acct)
	}))
	h.settle(h.l) // no write of the books' on its way
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		acct := h.account()
		acct.Status.Credited, acct.Status.Balance = 0, 0 // by hand: the policy reads the status
		return k8s.Status().Update(h.ctx, acct)
	}))
	must(t, k8s.Delete(h.ctx, h.account()))
	h.l.accountEvent(h.ctx, h.account(), false)
	if err := h.l.Closable(h.ns); err == nil {
		t.Fatal("an account with a balance is closable")
	}
	credit := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "late-credit"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 30, Reference: "LATE"}}
	must(t, k8s.Create(h.ctx, credit))
	if _, err := h.l.ApplyTopUp(credit); !errors.Is(err, ErrAccountClosing) {
		t.Fatalf("a credit to a closing account: %v, want ErrAccountClosing (it waits for the next account)", err)
	}
	if _, err := h.l.CreateTask(h.ctx, h.task("u"), 1); !errors.Is(err, ErrAccountClosing) {
		t.Fatalf("a create on a closing account: %v, want ErrAccountClosing", err)
	}
	debit := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "close"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: -30, Reference: "CLOSE", Note: "account closed"}}
	must(t, k8s.Create(h.ctx, debit))
	waitFor(t, func() bool { out, err := h.l.ApplyTopUp(debit); must(t, err); return out.Applied })
	a := h.settle(h.l)
	if err := h.l.Closable(h.ns); err == nil {
		t.Fatal("closable while the top-ups' journal entries wait for their status")
	}
	for _, tu := range []*videogenv1alpha1.PointTopUp{debit} {
		tu.Status.AppliedAt, tu.Status.AccountUID = ptrNow(), a.UID
		must(t, k8s.Status().Update(h.ctx, tu))
		h.l.ObserveTopUp(tu)
	}
	a = h.settle(h.l)
	must(t, h.l.Closable(h.ns))
	h.books(a, 0, 0, 0)
	if c := a.Status.Conditions; len(c) == 0 || c[0].Reason != videogenv1alpha1.ReasonClosing {
		t.Fatalf("conditions %+v: want Ready False, Closing", c)
	}
}

// Rule 6 across accounts: a reference applied to an account stays used in its namespace after
// the account is closed and deleted. Re-created, the account refuses a top-up with it, and a
// stale copy of the earlier account's top-up is not credited to the new one either.
func TestAReferenceIsUniqueInItsNamespace(t *testing.T) {
	h := newHarness(t, 0)
	apply := func(tu *videogenv1alpha1.PointTopUp) TopUpOutcome { return h.outcome(h.l, tu) }
	topUp := h.topUp
	// The first account: credited 100 (INV-T2), emptied by a debit, closed and deleted.
	credit, debit := topUp("inv-t2", "INV-T2", 100), topUp("close-1", "CLOSE-1", -100)
	stale := credit.DeepCopy()
	first := h.emptyAndClose(credit, debit)
	must(t, k8s.Delete(h.ctx, first))
	h.l.accountEvent(h.ctx, first, true)

	// The account of the same name again: another account, built from a fresh list.
	second := &videogenv1alpha1.PointAccount{ObjectMeta: objectMeta(h.ns, videogenv1alpha1.PointAccountName)}
	must(t, k8s.Create(h.ctx, second))
	h.l.accountEvent(h.ctx, second, false)
	again := topUp("inv-t2-again", "INV-T2", 100)
	out := apply(again)
	want := `reference "INV-T2" was applied by PointTopUp inv-t2 to an earlier account of this namespace`
	if !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference || !strings.Contains(out.Message, want) {
		t.Fatalf("a top-up with a reference applied to the earlier account: %+v, want refused: %s", out, want)
	}
	if out, err := h.l.ApplyTopUp(stale); err != nil || !out.AlreadyApplied {
		t.Fatalf("a stale copy of the earlier account's top-up: %+v %v, want AlreadyApplied", out, err)
	}
	h.books(h.settle(h.l), 0, 0, 0)
	// A new reference is credited to the new account as usual.
	if out := apply(topUp("inv-t3", "INV-T3", 40)); !out.Applied || out.BalanceAfter != 40 {
		t.Fatalf("a new reference on the re-created account: %+v", out)
	}
	h.books(h.settle(h.l), 40, 0, 0)
	// So does a manager elected later, which builds its books from the list of top-ups.
	l2 := h.start(h.ctx, "ledger-2")
	if out, err := l2.ApplyTopUp(again); err != nil || !out.Refused || !strings.Contains(out.Message, want) {
		t.Fatalf("a new manager: %+v %v, want refused: %s", out, err, want)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("timed out")
}

func objectMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

func ptrNow() *metav1.Time {
	now := metav1.Now()
	return &now
}

// A stopped ledger starts no writer: before, a writer returned at once on the ended context
// and its exit scheduled the next, spinning a goroutine per account left to write.
func TestAStoppedLedgerStartsNoWriter(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	l := New(Config{})
	l.ctx = ctx
	b := newBook("stopped")
	b.built, b.dirty = true, true
	b.account = &videogenv1alpha1.PointAccount{}

	cancel()
	b.mu.Lock()
	l.schedule(b)
	flushing := b.flushing
	b.mu.Unlock()
	if flushing {
		t.Fatal("schedule started a writer after the ledger stopped")
	}
}

// A task's closing write reaches the informer (as a delete: it leaves the open tasks' cache,
// carrying the copy from before) before the controller hands the ledger the copy it wrote.
// That copy says Deducted, and a settled charge never changes: the journal entry goes without
// reading the task back.
func TestTheClosingCopyDecidesTheJournalEntryWithoutARead(t *testing.T) {
	for _, tc := range []struct {
		charge videogenv1alpha1.ChargeState
		phase  videogenv1alpha1.TaskPhase
		spent  int64
	}{
		{videogenv1alpha1.ChargeDeducted, videogenv1alpha1.TaskSucceeded, 10},
		{videogenv1alpha1.ChargeRefunded, videogenv1alpha1.TaskFailed, 0}, // an earlier manager's refund landed late
	} {
		t.Run(string(tc.charge), func(t *testing.T) {
			h := newHarness(t, 100)
			// A ledger whose writer waits on a clock the test steps, so that nothing is written
			// between the informer's delete and the controller's copy.
			clk := clocktesting.NewFakeClock(time.Now())
			var gets atomic.Int32
			reader := interceptor.NewClient(k8s, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*videogenv1alpha1.VideoTask); ok {
						gets.Add(1)
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
			l := h.startWith(h.ctx, "ledger-2", func(cfg *Config) {
				cfg.Reader, cfg.Clock, cfg.WriteInterval = reader, clk, time.Second
			})
			settle := func() *videogenv1alpha1.PointAccount {
				t.Helper()
				must(t, wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
					clk.Step(time.Second)
					b := l.book(h.ns)
					b.mu.Lock()
					defer b.mu.Unlock()
					return !b.flushing && !b.dirty && len(b.queued) == 0, nil
				}))
				return h.account()
			}

			task := h.create(l, "t", 10)
			must(t, wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				clk.Step(time.Second)
				return l.Charge(task, &videogenv1alpha1.TaskResult{URL: "https://media.example/out/t.mp4"})
			}))
			settle()

			closed := task.DeepCopy()
			ended(tc.charge, tc.phase, true)(&closed.Status)
			must(t, k8s.Status().Update(h.ctx, closed))
			h.feedDelete(l, task) // the informer first: the task left the open tasks
			l.Observe(closed)     // then the controller's own copy
			a := settle()
			h.booksClosed(a, 100, tc.spent, 0)
			if n := gets.Load(); n != 0 {
				t.Fatalf("the ledger read the task %d times; its own copy said how it ended", n)
			}
		})
	}
}

// Top-ups that land in one write each show the balance right after them, in journal order, not
// all the balance after the last one: the audit trail replays.
func TestTopUpsInOneWriteShowTheirOwnBalance(t *testing.T) {
	acct := &videogenv1alpha1.PointAccount{Status: videogenv1alpha1.PointAccountStatus{Credited: 100, Balance: 100}}
	p := &plan{base: acct, fates: map[types.UID]fate{}, now: metav1.Now()}
	for i, amount := range []int64{5, -20, 5} {
		p.entries = append(p.entries, videogenv1alpha1.JournalEntry{Kind: videogenv1alpha1.JournalTopUp,
			Name: fmt.Sprintf("t%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)), Amount: amount})
	}
	apply(acct, p)
	var got []int64
	for _, j := range acct.Status.Journal {
		got = append(got, *j.BalanceAfter)
	}
	if want := []int64{105, 85, 90}; !slices.Equal(got, want) || acct.Status.Balance != 90 {
		t.Fatalf("balances after the top-ups %v (account %d), want %v (account 90)", got, acct.Status.Balance, want)
	}
}

// Only the ledger writes the account's status: points written there by anybody else (kubectl
// patch --subresource=status) are not adopted, and its next write puts the books' figures back,
// with a Warning event that says why the edit did not stick.
func TestAStatusEditIsWrittenBack(t *testing.T) {
	h := newHarness(t, 100)
	recorder := events.NewFakeRecorder(4)
	h.l.cfg.Recorder = recorder
	task := h.create(h.l, "t", 10)
	h.settle(h.l)
	edited := h.account()
	edited.Status.Credited, edited.Status.Balance, edited.Status.Spent = 99999, 99999, 0
	must(t, k8s.Status().Update(h.ctx, edited))
	h.l.accountEvent(h.ctx, edited.DeepCopy(), false) // as the informer delivers it

	if f := h.figures(h.l); f.Credited != 100 || f.Balance != 90 {
		t.Fatalf("the ledger took the edit: %+v", f)
	}
	select {
	case e := <-recorder.Events:
		if !strings.Contains(e, "Warning StatusRestored") || !strings.Contains(e, "credited 100, spent 0") {
			t.Errorf("event %q: want StatusRestored with the books' figures", e)
		}
	default:
		t.Error("no event says the edit is put back")
	}
	waitFor(t, func() bool { return h.account().Status.Credited == 100 })
	h.books(h.settle(h.l), 100, 0, 10)
	// A charge after it counts from the books, not from the edit.
	h.charge(h.l, task)
	h.books(h.settle(h.l), 100, 10, 0)
}

// The same edit landing while the ledger writes: the write's conflict brings the copy's
// resourceVersion, never its figures.
func TestAStatusEditDuringAWriteIsNotAdopted(t *testing.T) {
	h := newHarness(t, 100)
	task := h.create(h.l, "t", 10)
	h.settle(h.l)
	edited := h.account()
	edited.Status.Credited, edited.Status.Balance = 99999, 99989
	must(t, k8s.Status().Update(h.ctx, edited)) // the ledger's next write conflicts with it
	h.charge(h.l, task)
	h.books(h.settle(h.l), 100, 10, 0)
}

// A new manager's fence write, seen by the old manager's informer before any write of its own
// conflicts with it, stops the old manager at once: it never writes over the fence.
func TestAFenceSeenByTheInformerStopsTheOldManager(t *testing.T) {
	h := newHarness(t, 100)
	old := h.l
	task := h.create(old, "t", 10)
	h.settle(old)
	h.l = h.start(h.ctx, "ledger-2")
	old.accountEvent(h.ctx, h.account(), false)
	b := old.book(h.ns)
	b.mu.Lock()
	fenced := b.fenced
	b.mu.Unlock()
	if !fenced || old.Ready() {
		t.Fatalf("fenced %v, ready %v: the old manager keeps deciding after seeing the fence", fenced, old.Ready())
	}
	expectDeposed(t, old)
	if _, err := old.Charge(task, &videogenv1alpha1.TaskResult{URL: "x"}); !errors.Is(err, ErrNotReady) {
		t.Fatalf("a charge through the fenced ledger: %v, want ErrNotReady", err)
	}
	old.book(h.ns).mu.Lock()
	old.schedule(old.book(h.ns)) // even asked to write, it does not
	old.book(h.ns).mu.Unlock()
	time.Sleep(100 * time.Millisecond) // five write intervals: a writer would have written
	if a := h.account(); a.Status.Authority != "ledger-2" || a.Status.Spent != 0 {
		t.Fatalf("the old manager wrote over the fence: %+v", a.Status)
	}
}

// A fenced ledger is no longer the authority anywhere, so it does not linger as a manager that
// reports healthy and decides nothing: Start returns ErrFenced, which stops the manager (its
// Deployment restarts it, and it campaigns again), as losing its Lease does.
func TestAFencedLedgerEndsItsStart(t *testing.T) {
	h := newHarness(t, 100)
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	informers, err := cache.New(restConfig, cache.Options{Scheme: k8s.Scheme()})
	must(t, err)
	go func() { _ = informers.Start(ctx) }()
	signer, err := NewSigner(testKey)
	must(t, err)
	l := New(Config{Client: k8s, Reader: k8s, Cache: informers, Signer: signer, Identity: "ledger-started", WriteInterval: 20 * time.Millisecond})
	started := make(chan error, 1)
	go func() { started <- l.Start(ctx) }()
	waitFor(t, l.Ready)

	h.l = h.start(h.ctx, "ledger-2") // its fence write reaches the started ledger's informer
	select {
	case err := <-started:
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("Start returned %v, want ErrFenced", err)
		}
		if !strings.Contains(err.Error(), h.ns) || !strings.Contains(err.Error(), "ledger-2") {
			t.Fatalf("Start returned %q: want the account and the manager that fenced it named", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the fenced ledger's Start still runs (ready %v): its manager would keep running, deciding nothing", l.Ready())
	}
	if l.Ready() {
		t.Fatal("the fenced ledger still says it is ready")
	}
}

// expectDeposed checks that a fenced ledger told its Start to end (and so its manager to exit).
func expectDeposed(t *testing.T, l *Ledger) {
	t.Helper()
	select {
	case <-l.deposed:
		if !errors.Is(l.deposedBy, ErrFenced) {
			t.Fatalf("deposed by %v, want ErrFenced", l.deposedBy)
		}
	default:
		t.Fatal("the fenced ledger did not tell its Start: its manager would keep running, deciding nothing")
	}
}

// A task's status written by hand to Succeeded and Deducted (only a cluster admin can: the
// manager alone has the role to write task statuses), while its points are held or while its
// charge waits for the account's next write: the ledger wrote no charge, and the task says it
// succeeded, so it is charged from its hold. Before, its hold ended with nothing charged, or
// the waiting charge was dropped: free work, and spent below the sum of succeeded tasks' costs.
func TestADeductedStatusTheLedgerDidNotChargeIsCharged(t *testing.T) {
	for _, tc := range []struct {
		name         string
		chargeAsked  bool // the controller asked for the charge first
		closedAtOnce bool // the task left the open tasks before the account was written
	}{
		{name: "held"},
		{name: "charging", chargeAsked: true},
		{name: "held, then closed", closedAtOnce: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 100)
			// Nothing is written between the charge asked for and the hand-written status.
			s := h.stepped("ledger-2", nil)
			l := s.l
			task := h.create(l, "t", 10)
			h.books(s.settle(), 100, 0, 10)
			if tc.chargeAsked {
				s.chargeQueued(task)
			}
			forged := h.writeStatus(l, task, ended(videogenv1alpha1.ChargeDeducted, videogenv1alpha1.TaskSucceeded, tc.closedAtOnce))
			if tc.closedAtOnce {
				h.feedDelete(l, forged) // it left the open tasks' cache
			}
			a := s.settle()
			h.booksClosed(a, 100, 10, 0)
			if f := h.figures(l); f.Spent != 10 || f.Frozen != 0 || f.Balance != 90 {
				t.Fatalf("the ledger's figures %+v: want spent 10, frozen 0, balance 90", f)
			}
		})
	}
}

package ledger

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Interleavings of the ledger's writes with charges, creates and fences: each test forces one, step by
// step, and checks the invariants docs/ledger.md claims.

// stepped is a ledger whose writer waits on a clock the test steps: nothing is written between
// two steps of a test unless it settles.
type stepped struct {
	h   *harness
	l   *Ledger
	clk *clocktesting.FakeClock
}

func (h *harness) stepped(identity string, configure func(*Config)) *stepped {
	h.t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	l := h.startWith(h.ctx, identity, func(cfg *Config) {
		cfg.Clock, cfg.WriteInterval = clk, time.Second
		if configure != nil {
			configure(cfg)
		}
	})
	s := &stepped{h: h, l: l, clk: clk}
	s.settle() // the write that install schedules
	return s
}

// settle steps the clock until the account's status caught up with the books. The writer
// sleeps an interval after each write before it looks for more, so settle ends with its
// clock an interval past the last write; it then dates the last write now, and counts it as
// one that went early (so that no charge goes before the interval either: book.chargesDue),
// so that the next one waits for the next settle: what the test does between two settles is
// not written.
func (s *stepped) settle() *videogenv1alpha1.PointAccount {
	s.h.t.Helper()
	b := s.l.book(s.h.ns)
	must(s.h.t, wait.PollUntilContextTimeout(s.h.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		b.mu.Lock()
		done := !b.flushing && !b.dirty && len(b.queued) == 0
		if done {
			b.lastWrite, b.wroteEarly = s.clk.Now(), true
		}
		b.mu.Unlock()
		if !done && s.clk.HasWaiters() {
			s.clk.Step(time.Second)
		}
		return done, nil
	}))
	return s.h.account()
}

// chargeQueued asks for a held task's charge and checks that it waits for the next write.
func (s *stepped) chargeQueued(t *videogenv1alpha1.VideoTask) {
	s.h.t.Helper()
	done, err := s.l.Charge(t, &videogenv1alpha1.TaskResult{URL: "https://media.example/out/" + t.Name + ".mp4"})
	if done || err != nil {
		s.h.t.Fatalf("Charge(%s): %v %v, want it queued", t.Name, done, err)
	}
}

// A task whose charge is queued leaves the books before the account is written (it is deleted;
// or it is replaced by a task of the same name, whose event drops it): drop ends its hold, and
// then the write that lands its charge ends that hold a second time (apply takes every queued
// charge's amount off frozen, as if the task still held it). The account's status then shows
// the other tasks' holds short by the dropped task's price, and the balance that much higher,
// until something else dirties the books.
//
// Interleaving: a and b held; Charge(a) queued; a deleted (its delete event, or the Add of a
// new task of the same name); the account written.
func TestAChargeQueuedForADroppedTaskDoesNotEndOtherHolds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recreate bool // a's name is used again, by a task made with kubectl
	}{
		{name: "deleted"},
		{name: "re-created under the same name", recreate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 100)
			s := h.stepped("ledger-2", nil)
			a := h.create(s.l, "a", 10)
			h.create(s.l, "b", 30)
			h.books(s.settle(), 100, 0, 40)

			s.chargeQueued(a)
			must(t, k8s.Delete(h.ctx, a))
			if tc.recreate {
				again := h.task("a")
				must(t, k8s.Create(h.ctx, again))
				h.feed(s.l, again) // the informer's Add of the new "a" drops the old one
			} else {
				h.feedDelete(s.l, a)
			}
			if f := h.figures(s.l); f.Frozen != 30 || f.Holds != 1 || f.Spent != 0 {
				t.Fatalf("the books before the write: %+v, want b's 30 frozen, a's charge queued", f)
			}
			acct := s.settle()
			// b still holds 30; a's 10 are spent (its work was done).
			if st := acct.Status; st.Holds != 1 {
				t.Errorf("the account's status shows %d holds, want 1 (b)", st.Holds)
			}
			h.books(acct, 100, 10, 30)
		})
	}
}

// CreateTask counts its hold under the task's name before it creates the task, with no UID
// yet, and unlocks the books for the create. If a task of that name already exists that the
// books have not seen (made with kubectl a moment before: its event is on its way; the REST
// name is derived from the Idempotency-Key, so the caller knows it), its event fills the
// pending entry's UID, and until the create's AlreadyExists relocks the books, View says the
// kubectl task is Held, at the REST request's price. The controller then runs it at that price
// without Admit: a task quoted at 80 points holds 1.
//
// Interleaving: kubectl creates "t" (costly); REST CreateTask("t", price 1) counts a pending
// hold; the informer's Add of the kubectl "t" arrives; the controller reconciles it (View,
// then its Frozen status write at the view's price); the REST create fails AlreadyExists.
func TestACreateOfAnExistingNameDoesNotAdmitTheOtherTask(t *testing.T) {
	h := newHarness(t, 100)
	existing := h.task("t")
	existing.Spec.Inputs.SourceVideoURL = "https://media.example/a-long-costly-one.mp4"

	var during View
	latest := existing // the newest copy of the kubectl task
	l := h.startWith(h.ctx, "ledger-2", func(cfg *Config) {
		inner := cfg.Client
		cfg.Client = interceptor.NewClient(withWatch{inner}, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if task, ok := obj.(*videogenv1alpha1.VideoTask); ok && task.Name == existing.Name {
					h.feed(h.l, existing) // h.l is set below, before CreateTask
					v, err := h.l.View(existing)
					must(t, err)
					during = v
					if v.Standing == Held {
						// The controller records the hold it was told of, at the view's price.
						latest = h.writeStatus(h.l, existing, func(st *videogenv1alpha1.VideoTaskStatus) {
							st.Phase, st.Charge, st.Cost = videogenv1alpha1.TaskQueued, videogenv1alpha1.ChargeFrozen, &v.Price
						})
					}
				}
				return c.Create(ctx, obj, opts...)
			},
		})
	})
	h.l = l
	must(t, k8s.Create(h.ctx, existing)) // its event is not delivered yet
	if _, err := l.CreateTask(h.ctx, h.task("t"), 1); !errors.Is(err, ErrTaskExists) {
		t.Fatalf("the REST create of a name in use: %v, want ErrTaskExists", err)
	}
	if during.Standing != Unknown && during.Standing != Unadmitted {
		t.Errorf("while the REST create ran, the kubectl task (never admitted) was %+v, want it not admitted", during)
	}
	if v, err := l.View(latest); err != nil || v.Standing != Unadmitted {
		t.Errorf("after the REST create failed, the kubectl task is %+v (%v): it holds the REST request's price, never quoted for it", v, err)
	}
	if f := h.figures(l); f.Frozen != 0 {
		t.Errorf("figures %+v: nothing was admitted, want nothing frozen", f)
	}
}

// withWatch gives a client.Client the Watch that interceptor.NewClient needs (never called).
type withWatch struct{ client.Client }

func (withWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("not watched")
}

// The subtle cases below were checked and hold; these tests pin them down.

// A failover between a charge's account write and the task's Deducted status (the new rule of
// observe: a Deducted status the books did not charge is charged from the hold must not take
// this legitimate flow for a hand edit). The old manager's charge write lands but reports an
// error, and the new manager's fence comes in the old one's pause before it looks again: the
// old one finds the fence and stops; the new one's books find the charge in the journal (the
// task Charged, not Held), and the Deducted status its controller writes forgets the entry:
// spent once, journal empty. The old manager's controller writing Deducted too (it saw the
// charge land, in another run of the same flow) changes nothing.
func TestAChargeThatLandsJustBeforeAFenceIsCountedOnceByTheNewManager(t *testing.T) {
	h := newHarness(t, 100)
	var l2 *Ledger
	var fenceErr error
	var fenced atomic.Bool
	l1 := h.startWith(h.ctx, "ledger-old", func(cfg *Config) {
		inner := cfg.Client
		cfg.Client = interceptor.NewClient(withWatch{inner}, interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				err := c.SubResource(sub).Update(ctx, obj, opts...)
				if a, ok := obj.(*videogenv1alpha1.PointAccount); ok && err == nil && len(a.Status.Journal) > 0 && fenced.CompareAndSwap(false, true) {
					// The charge landed; before its answer, a new manager is elected.
					l2, fenceErr = h.startQuietly("ledger-new")
					return errLost
				}
				return err
			},
		})
	})
	task := h.create(l1, "t", 10)
	if done, err := l1.Charge(task, &videogenv1alpha1.TaskResult{URL: "https://media.example/out/t.mp4"}); done || err != nil {
		t.Fatalf("Charge: %v %v, want it queued", done, err)
	}
	b1 := l1.book(h.ns)
	waitFor(t, func() bool { b1.mu.Lock(); defer b1.mu.Unlock(); return b1.fenced })
	must(t, fenceErr)
	expectDeposed(t, l1)

	v, err := l2.View(task)
	must(t, err)
	if v.Standing != Charged || v.Result == nil {
		t.Fatalf("the new manager's view: %+v, want Charged with the result", v)
	}
	done := h.writeStatus(l2, task, ended(videogenv1alpha1.ChargeDeducted, videogenv1alpha1.TaskSucceeded, false))
	h.feed(l2, done)
	h.feed(l2, task) // a lagging informer's older copy changes nothing
	closed := h.writeStatus(l2, done, func(st *videogenv1alpha1.VideoTaskStatus) { st.Closed = true })
	h.feedDelete(l2, closed)
	a := h.settle(l2)
	h.booksClosed(a, 100, 10, 0)
	if f := h.figures(l2); f.Spent != 10 || f.Frozen != 0 || f.Holds != 0 {
		t.Fatalf("the new manager's figures %+v", f)
	}
}

// startQuietly builds a ledger's books as start does, returning the error instead of failing
// the test (for a fault hook, which runs on another goroutine).
func (h *harness) startQuietly(identity string) (*Ledger, error) {
	signer, err := NewSigner(testKey)
	if err != nil {
		return nil, err
	}
	l := New(Config{Client: h.faults.client(), Reader: k8s, Signer: signer, Identity: identity, WriteInterval: 20 * time.Millisecond})
	l.ctx = h.ctx
	if err := l.build(h.ctx, h.ns); err != nil {
		return nil, err
	}
	l.ready.Store(true)
	return l, nil
}

// A top-up, a debit and a charge share one account write, which lands and reports an error
// twice: each retry writes the same absolute figures, so each is counted once, and the
// top-ups' balances read as a sequence.
func TestATopUpADebitAndAChargeInOneWriteThatLandsButFails(t *testing.T) {
	h := newHarness(t, 100)
	s := h.stepped("ledger-2", nil)
	task := h.create(s.l, "t", 10)
	h.books(s.settle(), 100, 0, 10)

	credit := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "credit"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 50, Reference: "INV-50"}}
	debit := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "debit"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: -20, Reference: "CORR-20", Note: "correction"}}
	for _, tu := range []*videogenv1alpha1.PointTopUp{credit, debit} {
		must(t, k8s.Create(h.ctx, tu))
		if out, err := s.l.ApplyTopUp(tu); err != nil || !out.Queued {
			t.Fatalf("%s: %+v %v, want it queued", tu.Name, out, err)
		}
	}
	if f := h.figures(s.l); f.Balance != 70 {
		t.Fatalf("figures %+v: the queued debit counts at once, the credit once written", f)
	}
	s.chargeQueued(task)
	h.faults.accountUpdates.Store(2)
	a := s.settle()
	if n := h.faults.accountUpdates.Load(); n > 0 {
		t.Fatalf("%d of the writes that land and fail are left: the test did not run its faults", n)
	}
	h.books(a, 130, 10, 0)
	if len(a.Status.Journal) != 3 {
		t.Fatalf("journal %+v: want the charge and the two top-ups once each", a.Status.Journal)
	}
	for _, tu := range []*videogenv1alpha1.PointTopUp{credit, debit} {
		if out, err := s.l.ApplyTopUp(tu); err != nil || !out.Applied {
			t.Fatalf("%s again: %+v %v, want Applied, not queued again", tu.Name, out, err)
		}
	}
	if f := h.figures(s.l); f.Balance != 120 || f.Credited != 130 || f.Spent != 10 {
		t.Fatalf("figures %+v", f)
	}
}

// An earlier manager's refund of a task lands late (docs/ledger.md, rule 4) while this
// ledger's write of the task's charge is on its way: observe takes the queued charge back (the
// task says Refunded), but the write already carries it. landed then skips the entry (it is no
// longer queued) and no fate is set for it (observe looked for it in the journal before the
// write landed), so the account keeps spent += price for a task that says Refunded, and the
// entry stays in the journal (Tidy reads only entries whose task left the books) until some
// newer copy of the task comes (its close, which waits for its webhook).
//
// Interleaving: t held; Charge(t) queued; the writer plans and sends the write; the late
// Refunded status lands and its event is observed; the write lands.
func TestALateRefundSeenWhileItsChargeIsWrittenGivesThePointsBack(t *testing.T) {
	h := newHarness(t, 100)
	var task *videogenv1alpha1.VideoTask
	var once atomic.Bool
	var hookErr error
	var l *Ledger
	s := h.stepped("ledger-2", func(cfg *Config) {
		inner := cfg.Client
		cfg.Client = interceptor.NewClient(withWatch{inner}, interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if a, ok := obj.(*videogenv1alpha1.PointAccount); ok && task != nil && len(a.Status.Journal) > 0 && once.CompareAndSwap(false, true) {
					// The earlier manager's refund lands now, and the informer brings it.
					refunded := task.DeepCopy()
					ended(videogenv1alpha1.ChargeRefunded, videogenv1alpha1.TaskFailed, false)(&refunded.Status)
					if hookErr = k8s.Status().Update(ctx, refunded); hookErr == nil {
						h.feed(l, refunded)
					}
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		})
	})
	l = s.l
	task = h.create(l, "t", 10)
	h.books(s.settle(), 100, 0, 10)
	s.chargeQueued(task)
	s.settle()
	must(t, hookErr)
	if !once.Load() {
		t.Fatal("the refund did not land during the charge's write")
	}
	l.Tidy(h.ns) // as the PointAccount controller does while the journal is not empty
	a := s.settle()
	// The task says Refunded: nothing is spent for it, and its entry goes.
	h.booksClosed(a, 100, 0, 0)
}

// A task made with kubectl whose backend answers at once: Admit counts it (pending), and the
// charge is asked for in the same reconcile, before any status write records the hold. A newer
// copy without the admission (someone annotates the task) means "the admission's write did not
// land" only for a pending task; a charging one keeps its hold and its charge: spent once.
func TestAKubectlTaskChargedBeforeItsHoldIsWrittenKeepsItsCharge(t *testing.T) {
	h := newHarness(t, 100)
	s := h.stepped("ledger-2", nil)
	task := h.task("k")
	must(t, k8s.Create(h.ctx, task))
	h.feed(s.l, task)
	must(t, admit(s.l, task, 10))
	s.chargeQueued(task)
	annotated := task.DeepCopy()
	annotated.Annotations = map[string]string{"note": "x"}
	must(t, k8s.Update(h.ctx, annotated))
	h.feed(s.l, annotated)
	if f := h.figures(s.l); f.Frozen != 10 || f.Holds != 1 {
		t.Fatalf("figures %+v: the charging task lost its hold", f)
	}
	h.books(s.settle(), 100, 10, 0)
	v, err := s.l.View(annotated)
	must(t, err)
	if v.Standing != Charged {
		t.Fatalf("view %+v, want Charged", v)
	}
	done := h.writeStatus(s.l, annotated, ended(videogenv1alpha1.ChargeDeducted, videogenv1alpha1.TaskSucceeded, false))
	h.feed(s.l, done)
	a := s.settle()
	h.booksClosed(a, 100, 10, 0)
}

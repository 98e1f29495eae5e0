package ledger

import (
	"errors"
	"testing"

	"k8s.io/client-go/util/retry"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Account lifecycle: an administrator's suspension or deletion racing
// the ledger's own account writes.

// changeDuringWrite runs the interleaving the tests below share: busy makes the ledger write the
// account (a REST create, a task refunded); that write lands and its answer is slow; meanwhile an administrator
// changes the account (change, which returns the account as stored after it) and the informer
// delivers the change, which accountEvent only notes (b.writing: seenRV); then the slow answer
// comes and the writer, landed, takes the copy it wrote (from before the change) for the books'
// account. It returns once the answer is in the books and the writer waits out its interval
// (the test's clock is not stepped: no next write).
func changeDuringWrite(t *testing.T, credited int64, busy func(*harness, *stepped), change func(h *harness) *videogenv1alpha1.PointAccount) (*harness, *stepped) {
	return changeDuringWriteThen(t, credited, busy, change, nil)
}

// changeDuringWriteThen is changeDuringWrite, with during run after the change's event and
// before the write's answer.
func changeDuringWriteThen(t *testing.T, credited int64, busy func(*harness, *stepped), change func(h *harness) *videogenv1alpha1.PointAccount,
	during func(*harness, *stepped)) (*harness, *stepped) {
	t.Helper()
	h := newHarness(t, credited)
	h.withFinalizer() // the PointAccount controller's first patch
	stall := newStalling()
	s := h.stepped("ledger-1", stall.wrap)
	b := s.l.book(h.ns)

	// 1. The books change (busy): a write is due.
	busy(h, s)
	stall.armed.Store(true)
	// 2. The write lands; its answer waits.
	if !s.stepUntilLanded(stall) {
		t.Fatal("the account write was not sent")
	}
	// 3. The administrator's change lands after the write; the informer delivers it before the
	// write's answer (a watch event and a slow response come on two connections).
	changed := change(h)
	s.l.accountEvent(h.ctx, changed.DeepCopy(), false)
	if during != nil {
		during(h, s)
	}
	// 4. The answer comes; the writer takes it into the books and waits out its interval.
	close(stall.released)
	waitFor(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return !b.writing && b.lastWrite.Equal(s.clk.Now())
	})
	return h, s
}

// A suspension that lands while the ledger's account write is on its way (its answer not in
// yet) is not in the books until the write after next lands: the informer's event of the
// suspension only moves seenRV (the writer "decides when the answer comes"), and the answer,
// landed, puts the copy the ledger wrote, from before the suspension, in b.account. accepting()
// reads that copy: a REST create is admitted and answered 202 (a kubectl task accepted, its
// price frozen) after the administrator's `kubectl patch` returned and after the ledger itself
// saw the suspension, for a write interval at least and for as long as the next write takes
// (a slow or struggling kube-apiserver: seconds and more). docs/api.md: suspension "stops new
// work".
//
// Every step is reachable: the ledger writes an account after every batch of admissions,
// charges and top-ups (up to once a second on a busy account), so an administrator's edit of a
// busy account can land while a write is on its way; a status update's answer and the
// informer's watch event come on different connections, in no set order.
//
// What the customer sees: an account suspended for cause keeps getting 202s (points frozen, the
// work run and charged) after the suspension; the administrator sees spec.suspended: true.
func TestASuspensionSeenDuringAnAccountWriteStopsNewTasks(t *testing.T) {
	busy := func(h *harness, s *stepped) { h.create(s.l, "before", 10) }
	h, s := changeDuringWrite(t, 100, busy, func(h *harness) *videogenv1alpha1.PointAccount {
		var a *videogenv1alpha1.PointAccount
		must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			a = h.account()
			a.Spec.Suspended = true
			return k8s.Update(h.ctx, a)
		}))
		return a
	})
	if task, err := s.l.CreateTask(h.ctx, h.task("after"), 10); !errors.Is(err, ErrAccountSuspended) {
		t.Fatalf("a REST create after the suspension was seen: err %v (created: %v), want ErrAccountSuspended (403)", err, task != nil)
	}
}

// The same with a deletion (kubectl delete pointaccount: its finalizer keeps it, Closing): a
// REST create after the deletion was seen is admitted and answered 202, and the close it holds
// up waits for that task. docs/ledger.md: deleting an account "stops new tasks at once".
func TestADeletionSeenDuringAnAccountWriteStopsNewTasks(t *testing.T) {
	// The account's last points are charged (its last task succeeded): the write carrying the
	// charge (balance, frozen and holds 0) is on its way when the administrator deletes the
	// account (the admission policy lets the delete through: the status already says empty).
	// The create that follows is of a free task (a template of price 0): with any price the
	// empty account would answer 402, not 403 account_closing, which is wrong but no 202.
	busy := func(h *harness, s *stepped) {
		task := h.create(s.l, "before", 10)
		s.settle()
		s.chargeQueued(task)
	}
	h, s := changeDuringWrite(t, 10, busy, func(h *harness) *videogenv1alpha1.PointAccount {
		must(t, k8s.Delete(h.ctx, h.account()))
		return h.account()
	})
	if task, err := s.l.CreateTask(h.ctx, h.task("after"), 0); !errors.Is(err, ErrAccountClosing) {
		t.Fatalf("a REST create after the deletion was seen: err %v (created: %v), want ErrAccountClosing (403)", err, task != nil)
	}
}

// The same window before the answer comes: while the write is on its way, the suspension's
// event only moved seenRV, and the books' account (from before the write) says not suspended.
// The write's answer can take as long as the kube-apiserver's request timeout (60 s).
func TestASuspensionSeenWhileAnAccountWriteWaitsForItsAnswerStopsNewTasks(t *testing.T) {
	busy := func(h *harness, s *stepped) { h.create(s.l, "before", 10) }
	changeDuringWriteThen(t, 100, busy, func(h *harness) *videogenv1alpha1.PointAccount {
		var a *videogenv1alpha1.PointAccount
		must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			a = h.account()
			a.Spec.Suspended = true
			return k8s.Update(h.ctx, a)
		}))
		return a
	}, func(h *harness, s *stepped) {
		if task, err := s.l.CreateTask(h.ctx, h.task("during"), 10); !errors.Is(err, ErrAccountSuspended) {
			t.Errorf("a REST create after the suspension was seen, the write's answer not in: err %v (created: %v), want ErrAccountSuspended (403)", err, task != nil)
		}
	})
}

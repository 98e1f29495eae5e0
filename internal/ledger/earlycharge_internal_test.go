package ledger

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// earlyChargeHarness is a ledger whose account-write interval ends only when the test steps
// its clock, with tasks a and b held and shown in the account (the interval's writes done).
func earlyChargeHarness(t *testing.T) (*harness, *Ledger, *clocktesting.FakeClock, *videogenv1alpha1.VideoTask, *videogenv1alpha1.VideoTask) {
	t.Helper()
	h := newHarness(t, 100)
	clk := clocktesting.NewFakeClock(time.Now())
	l := h.startWith(h.ctx, "ledger-2", func(cfg *Config) { cfg.Clock, cfg.WriteInterval = clk, time.Hour })
	a, b := h.create(l, "a", 10), h.create(l, "b", 15)
	must(t, wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		bk := l.book(h.ns)
		bk.mu.Lock()
		// A writer may still sleep out its interval (flushing): it has nothing to write.
		done := !bk.writing && !bk.dirty && len(bk.queued) == 0 && bk.account.Status.Frozen == 25
		bk.mu.Unlock()
		if !done {
			clk.Step(time.Hour) // not once done: the interval after the last write must run
		}
		return done, nil
	}))
	h.books(h.account(), 100, 0, 25)
	return h, l, clk, a, b
}

// queueCharge charges a held task, which must wait for the account's next write.
func queueCharge(t *testing.T, l *Ledger, task *videogenv1alpha1.VideoTask) {
	t.Helper()
	if done, err := l.Charge(task, &videogenv1alpha1.TaskResult{URL: "https://media.example/out/" + task.Name + ".mp4"}); done || err != nil {
		t.Fatalf("charging %s: %v %v, want it queued", task.Name, done, err)
	}
}

// Once every task the account holds waits to be charged and none came since the last write,
// nothing more can share the next write by waiting for it: it goes at once, instead of holding
// back those tasks' success until the interval ends (a lone task's, a burst's last ones').
func TestTheChargesOfEveryHeldTaskAreWrittenAtOnce(t *testing.T) {
	h, l, _, a, b := earlyChargeHarness(t)

	queueCharge(t, l, a)
	time.Sleep(300 * time.Millisecond) // the writer's chance to go too early
	if acct := h.account(); acct.Status.Spent != 0 {
		t.Fatalf("a's charge was written while b still held points and the interval ran (spent %d)", acct.Status.Spent)
	}

	queueCharge(t, l, b) // the clock is not stepped: only an early write can land it
	var acct *videogenv1alpha1.PointAccount
	must(t, wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		acct = h.account()
		return acct.Status.Spent != 0, nil
	}))
	h.books(acct, 100, 25, 0)
	if len(acct.Status.Journal) != 2 {
		t.Fatalf("journal %+v: want both charges in the one write", acct.Status.Journal)
	}
}

// A task that came since the account's last write (a burst still coming in) keeps the write
// waiting for its interval, even when every held task waits to be charged: more charges are
// on their way to share it.
func TestChargesWaitForTheIntervalWhileTasksComeIn(t *testing.T) {
	h, l, clk, a, b := earlyChargeHarness(t)
	c := h.create(l, "c", 20) // after the last write

	for _, task := range []*videogenv1alpha1.VideoTask{a, b, c} {
		queueCharge(t, l, task)
	}
	time.Sleep(300 * time.Millisecond)
	if acct := h.account(); acct.Status.Spent != 0 || acct.Status.Frozen != 25 {
		t.Fatalf("the account was written before its interval ended (spent %d, frozen %d) though c came since its last write",
			acct.Status.Spent, acct.Status.Frozen)
	}

	clk.Step(time.Hour)
	var acct *videogenv1alpha1.PointAccount
	must(t, wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		acct = h.account()
		return acct.Status.Spent != 0, nil
	}))
	h.books(acct, 100, 45, 0)
}

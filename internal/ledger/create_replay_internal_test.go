package ledger

import (
	"errors"
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// CreateTask decided the account's standing (suspended,
// closing: a 403 from stillSuspended/stillClosing, once the kube-apiserver shows
// it too) before it looked at the task's name. A REST task's name is derived from the account
// and the Idempotency-Key, so a second CreateTask of a name the books hold is a retry of a
// request whose task exists (or is being created): docs/api.md promises it the replay ("same
// key and same body → 200 with the same task, at any time while the task exists"), which the
// REST apiserver gives on ErrTaskExists (409, then a read around the cache). The balance is
// already checked after the name for that reason; the standing was not.
//
// Interleaving (one manager, two REST replicas): 1. POST /v1/tasks with Idempotency-Key K on
// replica A: the ledger admits "a" at 60 and creates it (held); the 202 is lost (the client's
// timeout, a connection cut, replica A restarting); 2. an administrator suspends the account
// (kubectl patch pointaccount default --type=merge -p '{"spec":{"suspended":true}}'); the
// ledger's account event brings it; 3. the client retries with K through replica B, whose
// cache has not seen "a" yet (its own watch lags: the replay check reads the cache), so the
// request reaches the ledger. Each step is an ordinary event: a lost answer, an administrator's
// action, a watch a second behind. What the customer sees: 403 account_suspended, "this account
// is suspended", for a request whose task exists, runs (a suspension stops new work only) and
// is charged 60; docs/api.md says a 4xx does not consume the key, so the client takes the
// request as refused, and submits it again once the suspension is lifted (a new key, or the
// same body elsewhere): paid twice. Want: ErrTaskExists (409, the replay: 200 with the task).
func TestARetryOfACreatedTaskIsItsReplayNotTheSuspensionsRefusal(t *testing.T) {
	h := newHarness(t, 100)
	// 1. The first request's task, admitted and created: it holds 60.
	a := h.create(h.l, "a", 60)
	h.feed(h.l, a)
	// 2. The administrator suspends the account; the ledger learns it.
	var acct *videogenv1alpha1.PointAccount
	must(t, retryOnConflict(func() error {
		acct = h.account()
		acct.Spec.Suspended = true
		return k8s.Update(h.ctx, acct)
	}))
	h.l.accountEvent(h.ctx, acct, false)
	// Checked, holds: a new request on the suspended account is refused 403.
	if task, err := h.l.CreateTask(h.ctx, h.task("b"), 10); !errors.Is(err, ErrAccountSuspended) {
		t.Fatalf("a new REST create on a suspended account: %v (created: %v), want ErrAccountSuspended", err, task != nil)
	}
	// 3. The retry of the first request (same name, same body, same price).
	task, err := h.l.CreateTask(h.ctx, h.task("a"), 60)
	if errors.Is(err, ErrAccountSuspended) {
		t.Fatalf("the retry of a request whose task %q exists and holds 60 is refused 403 account_suspended (%v): "+
			"the client is told its request was refused while its task runs and is charged", a.Name, err)
	}
	if !errors.Is(err, ErrTaskExists) {
		t.Fatalf("the retry of a request whose task exists: %v (created: %v), want ErrTaskExists (the replay)", err, task != nil)
	}
	// Nothing changed: one hold of 60, the balance 40.
	f := h.figures(h.l)
	if f.Frozen != 60 || f.Holds != 1 || f.Balance != 40 || f.Credited != 100 || f.Spent != 0 {
		t.Fatalf("figures %+v after the retry: want credited 100, spent 0, frozen 60 in one hold, balance 40", f)
	}
}

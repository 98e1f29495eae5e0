package ledger

import (
	"errors"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// The REST side of admit_closing_account_internal_test.go's kubectl fix: CreateTask, the REST
// apiserver's create (POST /v1/tasks and every task-creating POST), refused a task for a closing
// or suspended account from the books' copy of the account alone, which only the account's
// informer events bring. Admit (kubectl tasks) reads the account from the kube-apiserver before
// such a refusal (stillClosing, stillSuspended); CreateTask did not.
//
// Interleaving (one manager; the REST replica calls its ledger port): 1. the account (empty)
// is deleted; its finalizer keeps it, and the books see the deletionTimestamp; 2. it is
// closable, the finalizer goes, the account is gone (the ledger's delete event lags); 3. the
// administrator creates it again (`kubectl delete --wait && kubectl apply`, a GitOps sync), its
// Add lags too; 4. the customer, told the account is back, POSTs /v1/tasks (a free template:
// price 0, which an empty account can take). Reachable: any lag of the manager's account
// informer (a relist, a slow watch stream), for as long as it lasts. What the customer sees:
// 403 account_closing, "this account is being closed and takes no new tasks; contact your
// administrator": a 403, which clients do not retry, on an account that is open, whose
// administrator sees nothing wrong. The same for a suspension lifted (its update event lags):
// 403 account_suspended on an account whose spec says it is not.
//
// Want: as Admit, not_ready (the REST ledger client retries it within its deadline, and the
// account's events come) unless the kube-apiserver still shows the account closing (or
// suspended); then the 403 stands (checked, holds: account_change_during_write_internal_test.go's tests of a
// deletion or suspension seen during a write still pass).
func TestARESTCreateOfAnAccountCreatedAgainIsNotRefusedForTheOldAccountsDeletion(t *testing.T) {
	h := newHarness(t, 0)
	h.withFinalizer()
	h.l.accountEvent(h.ctx, h.account(), false)
	h.settle(h.l)

	// 1. Deleted while empty; the ledger learns it.
	must(t, k8s.Delete(h.ctx, h.account()))
	h.l.accountEvent(h.ctx, h.account(), false)
	h.settle(h.l)
	// Checked, holds: while the kube-apiserver shows it closing, a REST create is refused.
	if task, err := h.l.CreateTask(h.ctx, h.task("r0"), 0); !errors.Is(err, ErrAccountClosing) {
		t.Fatalf("a REST create on an account the kube-apiserver shows closing: %v (created: %v), want ErrAccountClosing", err, task != nil)
	}

	// 2. Closable: the finalizer goes, and so does the account (its delete event lags).
	must(t, h.l.Closable(h.ns))
	gone := h.account()
	gone.Finalizers = nil
	must(t, k8s.Update(h.ctx, gone))
	// 3. Created again (its Add lags).
	renewed := &videogenv1alpha1.PointAccount{ObjectMeta: objectMeta(h.ns, videogenv1alpha1.PointAccountName)}
	must(t, k8s.Create(h.ctx, renewed))
	if now := h.account(); now.UID == gone.UID || !now.DeletionTimestamp.IsZero() {
		t.Fatalf("the account was not replaced by an open one: uid %s (old %s), deleting %v", now.UID, gone.UID, now.DeletionTimestamp)
	}
	// 4. The customer's REST create.
	task, err := h.l.CreateTask(h.ctx, h.task("r1"), 0)
	if errors.Is(err, ErrAccountClosing) {
		t.Fatalf("a REST create is refused 403 account_closing (%v) from the books' copy of the deleted account, "+
			"though the kube-apiserver's account %s (uid %s) is open", err, client.ObjectKeyFromObject(renewed), renewed.UID)
	}
	if err != nil && !errors.Is(err, ErrNotReady) {
		t.Fatalf("a REST create on the account created again: %v (created: %v), want not_ready (retried) or created", err, task != nil)
	}
}

// The same for a suspension lifted before the REST create (the account's update event lags).
func TestARESTCreateAfterASuspensionIsLiftedIsNotRefusedFromAStaleSpec(t *testing.T) {
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
	h.l.accountEvent(h.ctx, suspend(true), false)
	// Checked, holds: a suspension the kube-apiserver shows refuses a REST create.
	if task, err := h.l.CreateTask(h.ctx, h.task("r0"), 10); !errors.Is(err, ErrAccountSuspended) {
		t.Fatalf("a REST create on a suspended account: %v (created: %v), want ErrAccountSuspended", err, task != nil)
	}
	suspend(false) // lifted; its event lags
	task, err := h.l.CreateTask(h.ctx, h.task("r1"), 10)
	if errors.Is(err, ErrAccountSuspended) {
		t.Fatalf("a REST create is refused 403 account_suspended (%v) from the books' copy of the account's spec, "+
			"though the suspension was lifted before it was sent", err)
	}
	if err != nil && !errors.Is(err, ErrNotReady) {
		t.Fatalf("a REST create after the suspension was lifted: %v (created: %v), want not_ready (retried) or created", err, task != nil)
	}
}

package ledger

import (
	"errors"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// A kubectl task's refusal for a closing account is final (the
// controller rejects it: Failed, account_closing, "the account is being deleted"), and Admit
// decided it from the books' copy of the account alone, which only the account's informer
// events bring; a suspension and a short balance are read again from the kube-apiserver before
// they refuse a task (stillSuspended, keepsBooks), a deletionTimestamp was not. The VideoTask
// and PointAccount watches are separate streams with no order between them, so a task of an
// account created again (same name, new UID) can reach the ledger while its books still hold
// the old account's deletion.
//
// Interleaving (one manager): 1. the account (empty: the admission policy lets it go) is
// deleted; its finalizer keeps it, and the ledger's books see the deletionTimestamp; 2. it is
// closable, the PointAccount controller removes the finalizer: it is gone (the ledger's delete
// event for it lags); 3. the administrator creates the account again (`kubectl delete --wait
// && kubectl apply` of the namespace's manifests, or a GitOps sync), its Add lags too; 4. a
// kubectl task k is created (a free template: price 0, which the account can take with no
// top-up) and delivered; its reconcile asks Admit(k, 0). Reachable: any lag of the account
// informer behind the task informer (a relist, a slow stream). What a user sees: kubectl get
// videotask k: Failed, "the account is being deleted and takes no new tasks", on an account
// created a moment before, open, whose spec and metadata say nothing of the kind.
func TestAKubectlTaskOfAnAccountCreatedAgainIsNotRefusedForTheOldAccountsDeletion(t *testing.T) {
	h := newHarness(t, 0)
	h.withFinalizer()
	h.l.accountEvent(h.ctx, h.account(), false)
	h.settle(h.l)

	// 1. Deleted while empty; the ledger learns it.
	must(t, k8s.Delete(h.ctx, h.account()))
	h.l.accountEvent(h.ctx, h.account(), false)
	h.settle(h.l)

	// Checked, holds: while the kube-apiserver still shows the account closing, a kubectl task
	// is refused for good.
	k0 := h.task("k0")
	must(t, k8s.Create(h.ctx, k0))
	h.feed(h.l, k0)
	if err := admit(h.l, k0, 0); !errors.Is(err, ErrAccountClosing) {
		t.Fatalf("Admit(k0) on an account the kube-apiserver shows closing: %v, want ErrAccountClosing", err)
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
	// 4. A task of the new account.
	k := h.task("k")
	must(t, k8s.Create(h.ctx, k))
	h.feed(h.l, k)
	if err := admit(h.l, k, 0); errors.Is(err, ErrAccountClosing) {
		t.Fatalf("Admit(k) refuses it for good (%v) from the books' copy of the deleted account, "+
			"though the kube-apiserver's account %s (uid %s) is open", err, client.ObjectKeyFromObject(renewed), renewed.UID)
	}
}

// Checked, holds (a follow-up on Admit's resourceVersion): Admit moves the entry's
// resourceVersion only forward, and to a copy View has already judged. (a) A copy older than
// the books' (a label landed, and its event reached the ledger, between the controller's View
// and its Admit) leaves the entry at the newer copy; the acceptance write from the older copy
// certainly conflicts and Unadmit ends the hold. (b) A copy newer than the books' (the label's
// event has not come) moves the entry to it; that event, when it comes, neither ends the hold
// (base is that copy) nor counts it twice.
func TestAdmitMovesTheEntryOnlyForwardAndItsOwnCopysEventChangesNothing(t *testing.T) {
	h := newHarness(t, 100)
	label := func(k *videogenv1alpha1.VideoTask, v string) *videogenv1alpha1.VideoTask {
		k = k.DeepCopy()
		k.Labels = map[string]string{"team": v}
		must(t, k8s.Update(h.ctx, k))
		return k
	}
	rvOf := func(name string) string {
		b := h.l.book(h.ns)
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.tasks[name].rv
	}

	// (a)
	a := h.task("a")
	must(t, k8s.Create(h.ctx, a))
	h.feed(h.l, a)
	if v, err := h.l.View(a); err != nil || v.Standing != Unadmitted {
		t.Fatalf("View(a): %+v %v, want Unadmitted", v, err)
	}
	a2 := label(a, "x")
	h.feed(h.l, a2)
	must(t, admit(h.l, a, 60))
	if rv := rvOf("a"); rv != a2.ResourceVersion {
		t.Fatalf("Admit with an older copy moved the entry to %s, want %s (the newer copy's)", rv, a2.ResourceVersion)
	}
	h.l.Unadmit(a) // the acceptance write from a's copy conflicts
	if f := h.figures(h.l); f.Frozen != 0 || f.Holds != 0 {
		t.Fatalf("after Unadmit: %+v, want nothing held", f)
	}

	// (b)
	c := h.task("c")
	must(t, k8s.Create(h.ctx, c))
	h.feed(h.l, c)
	c2 := label(c, "y") // its event lags
	if v, err := h.l.View(c2); err != nil || v.Standing != Unadmitted {
		t.Fatalf("View(c2): %+v %v, want Unadmitted", v, err)
	}
	must(t, admit(h.l, c2, 60))
	h.feed(h.l, c2)
	if f := h.figures(h.l); f.Frozen != 60 || f.Holds != 1 {
		t.Fatalf("after c2's own event: %+v, want 60 held once", f)
	}
	if v, err := h.l.View(c2); err != nil || v.Standing != Held {
		t.Fatalf("View(c2) after its event: %+v %v, want Held", v, err)
	}
}

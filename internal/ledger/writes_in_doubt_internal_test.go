package ledger

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// docs/ledger.md rule 2 says a hold is counted
// before its create and un-counted "only when that write certainly failed (a refusal, or a
// re-read showing no task)". CreateTask did not keep that when the create's error left it in
// doubt AND its re-read never answered (readTask gave up after its ~2.5 s of retries): it
// took the hold back and deleted the create's entry (countLater was only meant for another
// task in the name's way). The create had landed: the task exists, signed, and nothing holds
// its price any more.
//
// Interleaving (one manager; the "informer" fed by hand):
//  1. Balance 100. REST CreateTask("a", 60): the hold is counted, the create lands and reports
//     an error (a timeout after the commit).
//  2. CreateTask re-reads "a"; the kube-apiserver keeps failing those reads (429s, timeouts)
//     past readTask's retries: not found, not answered.
//  3. The hold of "a" is taken back (frozen 0); the REST client is told the create is in doubt.
//  4. Another REST create ("b", 60; another replica, the same tenant) is admitted against the
//     whole balance again: 100 available.
//  5. The informer delivers the Add of "a": the books count it as an admission they did not
//     make; the balance no longer covers it: Overdrawn. The controller fails it
//     InsufficientBalance before it runs.
//
// Reachable: step 1 is the faults the ledger is built for (a write that lands but reports an
// error); step 2 is a kube-apiserver under load (the same load that made the create time
// out), and nothing else is needed but a second create within the second before the Add event
// of "a" comes.
//
// What a user sees: "a", admitted at a balance that covered it, stored, and answered "in
// doubt" (a retry with its key finds it), fails insufficient_balance while "b", asked for
// later, runs. With its hold kept, "b" gets a 402 it can retry (the doubt lasts until the
// kube-apiserver answers), and "a" runs.
func TestACreateInDoubtWhoseReadIsNotAnsweredKeepsItsHold(t *testing.T) {
	h := newHarness(t, 100)
	var outage atomic.Bool
	l := h.startWith(h.ctx, "ledger-17", func(cfg *Config) {
		cfg.Reader = interceptor.NewClient(k8s, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*videogenv1alpha1.VideoTask); ok && outage.Load() {
					return apierrors.NewTooManyRequests("the kube-apiserver is throttling", 1)
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
	})
	h.l = l
	h.faults.creates.Store(1) // step 1: the create of "a" lands and reports an error
	outage.Store(true)        // step 2: its re-reads are not answered
	if _, err := l.CreateTask(h.ctx, h.task("a"), 60); err == nil || errors.Is(err, ErrTaskExists) {
		t.Fatalf("the create in doubt: %v, want an error that leaves it in doubt", err)
	}
	a := &videogenv1alpha1.VideoTask{}
	must(t, k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "a"}, a))
	if f := h.figures(l); f.Frozen != 60 {
		t.Errorf("after the create in doubt (it landed): %+v, want its 60 still held", f)
	}
	// Step 4, within the second before anything else happens.
	_, errB := l.CreateTask(h.ctx, h.task("b"), 60)
	outage.Store(false)
	h.feed(l, a) // step 5
	v, err := l.View(a)
	must(t, err)
	var short *InsufficientBalanceError
	if v.Standing != Held || !errors.As(errB, &short) {
		t.Fatalf("task a (created, admitted at a balance that covered it): %+v; the later create of b: %v;\n"+
			"want a Held and b refused 402: a's hold was taken back while its create was in doubt", v, errB)
	}
	if f := h.figures(l); f.Frozen != 60 || f.Holds != 1 || f.Balance != 40 {
		t.Fatalf("figures %+v: want a's 60 held once", f)
	}
	h.books(h.settle(l), 100, 0, 60)
}

// The doc
// says a namespace deleted while its account has points stays Terminating because the account's
// finalizer waits for a zero balance, and that removing the finalizer by hand is the way out.
// But the pointaccount-close-when-empty ValidatingAdmissionPolicy refuses the namespace
// controller's DELETE of the account itself (balance ≠ 0), unlike pointtopup-audit-trail, which
// lets the namespace controller through. So the account is never marked deleted, removing its
// finalizer changes nothing (the namespace controller's next DELETE is refused again), no debit
// can be created in a Terminating namespace to empty it, and the namespace is stuck for good:
// the only way out is to delete the cluster-wide policy binding.
//
// Steps: an account with 50 points and the ledger's finalizer; the namespace is deleted, so the
// namespace controller (system:serviceaccount:kube-system:namespace-controller) deletes its
// contents; the administrator follows the doc and removes the finalizer; the namespace
// controller deletes the account again. Reachable: `kubectl delete namespace` of a tenant whose
// account was not closed first, which is what the doc's paragraph is about.
func TestTheNamespaceControllerMayDeleteAnAccountWithPoints(t *testing.T) {
	h := newHarness(t, 50)
	acct := h.account()
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error { // the ledger writes the status meanwhile
		acct = h.account()
		acct.Finalizers = append(acct.Finalizers, videogenv1alpha1.FinalizerLedger)
		return k8s.Update(h.ctx, acct)
	}))

	const nsController = "system:serviceaccount:kube-system:namespace-controller"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "namespace-controller"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{videogenv1alpha1.GroupVersion.Group}, Resources: []string{"pointaccounts"},
			Verbs: []string{"get", "list", "delete", "deletecollection"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "namespace-controller"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: nsController}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "namespace-controller"}}
	must(t, k8s.Create(h.ctx, role))
	must(t, k8s.Create(h.ctx, binding))
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: nsController, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	ctrl, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	must(t, err)
	for i := 0; ; i++ { // the authorizer sees the binding through its informer
		if err := ctrl.Get(h.ctx, client.ObjectKeyFromObject(acct), &videogenv1alpha1.PointAccount{}); err == nil {
			break
		} else if i == 100 {
			t.Fatalf("the namespace controller's role never took effect: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The namespace controller deletes the namespace's contents.
	if err := ctrl.Delete(h.ctx, h.account()); err != nil {
		t.Fatalf("the namespace controller's DELETE of an account with 50 points: %v\n"+
			"want it marked deleted and kept by its finalizer (docs/ledger.md); refused, the namespace stays Terminating "+
			"whatever is done to the finalizer", err)
	}
	// The administrator follows the doc: the finalizer comes off, and the account goes.
	gone := h.account()
	if gone.DeletionTimestamp.IsZero() {
		t.Fatal("the account was not marked deleted")
	}
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		gone = h.account()
		gone.Finalizers = nil
		return k8s.Update(h.ctx, gone)
	}))
	if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(gone), &videogenv1alpha1.PointAccount{}); !isNotFound(err) {
		t.Fatalf("the account after its finalizer was removed: %v, want gone", err)
	}
}

// An account write that landed
// but reported an error is read back to see what landed; while those reads failed, commit went
// straight back to writing from its old copy, which (the write having landed) conflicted at
// once, then read again, with no pause and no end until a read was answered: a kube-apiserver
// that already struggles was hammered with writes that could only conflict.
//
// Steps: an account write lands and reports an error; the next three reads of the account
// fail (throttled). The read is retried with pauses, and the account is written once more
// after it is answered: two writes, not one more for each failed read.
func TestAnAccountWriteInDoubtIsReadBackWithPausesNotWrittenAgainAtOnce(t *testing.T) {
	h := newHarness(t, 100)
	var readFailures, accountWrites atomic.Int32
	l := h.startWith(h.ctx, "ledger-17b", func(cfg *Config) {
		cfg.Reader = interceptor.NewClient(k8s, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*videogenv1alpha1.PointAccount); ok && readFailures.Add(-1) >= 0 {
					return apierrors.NewTooManyRequests("the kube-apiserver is throttling", 1)
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
		cfg.Client = interceptor.NewClient(cfg.Client.(client.WithWatch), interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if _, ok := obj.(*videogenv1alpha1.PointAccount); ok {
					accountWrites.Add(1)
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		})
	})
	h.l = l
	h.settle(l)
	// What one task's create costs in account writes with nothing failing...
	accountWrites.Store(0)
	h.create(l, "z", 10)
	h.settle(l)
	clean := accountWrites.Load()
	// ...and with its first write landing in doubt and three read-backs throttled.
	accountWrites.Store(0)
	h.faults.accountUpdates.Store(1)
	readFailures.Store(3)
	h.create(l, "a", 10)
	h.books(h.settle(l), 100, 0, 20)
	if n := accountWrites.Load(); n != clean+1 {
		t.Fatalf("%d account writes for a task's create whose first write landed in doubt (%d without faults), want %d: one more, after the read-back",
			n, clean, clean+1)
	}
}

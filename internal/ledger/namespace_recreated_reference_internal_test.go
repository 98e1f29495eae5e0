package ledger

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// A namespace deleted and made again with its name (for another tenant) starts with no
// reference used (docs/ledger.md, rule 6). The PointTopUp controller's cache may still hold a
// copy of the old namespace's applied top-up when the new account's books are built, and its
// reconcile hands that copy to ObserveTopUp: before, the books took its reference as one
// "applied to an earlier account of this namespace", and refused the new tenant's first top-up
// with that reference for good (DuplicateReference), until the manager restarted.
func TestAStaleTopUpOfADeletedNamespaceUsesNoReferenceOfItsSuccessor(t *testing.T) {
	h := newHarness(t, 0)
	apply := func(tu *videogenv1alpha1.PointTopUp) TopUpOutcome { return h.outcome(h.l, tu) }
	topUp := h.topUp

	// The old tenant: credited 100 (INV-1), debited to zero, closed.
	credit, debit := topUp("inv-1", "INV-1", 100), topUp("close-1", "CLOSE-1", -100)
	first := h.emptyAndClose(credit, debit)
	stale := credit.DeepCopy() // what the controller's lagging cache keeps

	// The namespace goes with everything in it. envtest has no namespace controller: the test
	// deletes the contents as that controller (the audit-trail policy lets it through), and takes
	// the namespace's finalizers off through /finalize once they are gone.
	ns := &corev1.Namespace{}
	must(t, k8s.Get(h.ctx, client.ObjectKey{Name: h.ns}, ns))
	must(t, k8s.Delete(h.ctx, ns))
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:namespace-controller",
		Groups: []string{"system:masters"}}
	nsController, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	must(t, err)
	for _, tu := range []*videogenv1alpha1.PointTopUp{credit, debit} {
		must(t, nsController.Delete(h.ctx, tu))
		must(t, k8s.Get(h.ctx, client.ObjectKeyFromObject(tu), tu))
		orig := tu.DeepCopy()
		controllerutil.RemoveFinalizer(tu, videogenv1alpha1.FinalizerLedger) // the controller: the account is closing
		must(t, k8s.Patch(h.ctx, tu, client.MergeFrom(orig)))
	}
	must(t, nsController.Delete(h.ctx, first))
	h.l.accountEvent(h.ctx, first, true)
	must(t, testenv.RemoveNamespace(h.ctx, k8s, h.ns))

	// Another tenant's namespace of that name, and its account.
	must(t, k8s.Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.ns}}))
	second := &videogenv1alpha1.PointAccount{ObjectMeta: objectMeta(h.ns, videogenv1alpha1.PointAccountName)}
	must(t, k8s.Create(h.ctx, second))
	h.l.accountEvent(h.ctx, second, false)
	waitFor(t, func() bool { _, err := h.l.Balance(h.ctx, h.ns); return err == nil })

	// The controller reconciles the old top-up from its cache, which has not seen it go.
	h.l.ObserveTopUp(stale)

	// The new tenant's administrator credits invoice INV-1 of the new tenant.
	if out := apply(topUp("credit-1", "INV-1", 50)); !out.Applied || out.BalanceAfter != 50 {
		t.Fatalf("the new namespace's first top-up with reference INV-1: %+v, want applied (balance 50)", out)
	}
	h.books(h.settle(h.l), 50, 0, 0)
}

package controllers_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

// namespaceController is a client acting as the kube-controller-manager's namespace controller
// (the admission policies let it delete what they refuse others), with every permission.
func namespaceController() client.Client {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:namespace-controller",
		Groups: []string{"system:masters", "system:authenticated"}}
	nc, err := client.New(c, client.Options{Scheme: k8sClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return nc
}

func topUpGone(t *videogenv1alpha1.PointTopUp) func() bool {
	return func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(t), &videogenv1alpha1.PointTopUp{}))
	}
}

var _ = Describe("PointTopUp ledger finalizer", func() {
	// A top-up refused by hand and deleted while its credit is QUEUED (the account
	// write carrying its entry not landed yet: here the account's status writes fail, as while
	// the kube-apiserver is slow or the write interval has not come) was gone before the entry
	// landed: the credit-in-journal policy reads a journal without it, the entry's fate check
	// found the top-up gone, and a rebuilt manager credited the invoice again. With the ledger's
	// finalizer (put on before the ledger queued the credit) the delete leaves it Terminating;
	// once the credit lands the controller writes it applied over the hand refusal and keeps the
	// finalizer: the top-up stays listed, with its reference.
	It("keeps a hand-refused top-up deleted while its credit is queued, applied and Terminating", func() {
		var blocked, queued atomic.Bool
		stop := startManager(testOptions(testbackend.New()), intercepted(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if a, ok := obj.(*videogenv1alpha1.PointAccount); ok && blocked.Load() {
					for _, j := range a.Status.Journal {
						if j.Kind == videogenv1alpha1.JournalTopUp && j.Name == "inv" {
							queued.Store(true)
							return errors.New("injected: the account write carrying the credit does not get through")
						}
					}
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}))
		defer stop()
		ns := suite.NewAccount(0)
		Eventually(func() string { return suite.AccountOf(ns).Status.Authority }).ShouldNot(BeEmpty(), "the ledger keeps the account's books")
		blocked.Store(true)
		inv := suite.TopUp(ns, "inv", 100)
		Eventually(queued.Load).Should(BeTrue(), "the ledger queues the credit and tries to write it")
		Expect(controllerutil.ContainsFinalizer(topUpOf(inv), videogenv1alpha1.FinalizerLedger)).To(BeTrue())

		edited := topUpOf(inv)
		meta.SetStatusCondition(&edited.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied,
			Status: metav1.ConditionFalse, Reason: videogenv1alpha1.ReasonDuplicateReference, Message: "cleanup by script"})
		Expect(k8sClient.Status().Update(ctx, edited)).To(Succeed())
		Expect(k8sClient.Delete(ctx, topUpOf(inv))).To(Succeed()) // both policies let it: nothing in the journal yet
		blocked.Store(false)

		Eventually(appliedReason(inv)).Should(Equal(videogenv1alpha1.ReasonCredited))
		Expect(suite.AccountOf(ns).Status.Credited).To(Equal(int64(100)))
		Eventually(func() int { return len(suite.AccountOf(ns).Status.Journal) }).Should(BeZero())
		Consistently(func(g Gomega) {
			got := topUpOf(inv)
			g.Expect(got.DeletionTimestamp).NotTo(BeNil())
			g.Expect(got.Status.AppliedAt).NotTo(BeNil())
			g.Expect(got.Finalizers).To(ContainElement(videogenv1alpha1.FinalizerLedger))
		}, "1s").Should(Succeed(), "an applied top-up stays, Terminating, listed with its reference")

		again := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "again"},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: 100, Reference: inv.Spec.Reference}}
		Expect(k8sClient.Create(ctx, again)).To(Succeed())
		Eventually(appliedReason(again)).Should(Equal(videogenv1alpha1.ReasonDuplicateReference))
		// Refused for good, it holds nothing: deleted, it goes.
		Expect(k8sClient.Delete(ctx, topUpOf(again))).To(Succeed())
		Eventually(topUpGone(again)).Should(BeTrue(), "a refused top-up deleted goes")
		Expect(suite.AccountOf(ns).Status.Credited).To(Equal(int64(100)))
	})

	It("lets a top-up that was never queued go, and any top-up of a namespace being deleted once its account closes", func() {
		stop := startManager(testOptions(testbackend.New()), nil)
		defer stop()
		nc := namespaceController()

		// No account: the top-up waits (AccountNotFound), guarded, and nothing is queued.
		bare := envsuite.Unique("bare")
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bare}})).To(Succeed())
		waiting := suite.TopUp(bare, "waiting", 100)
		Eventually(appliedReason(waiting)).Should(Equal(videogenv1alpha1.ReasonAccountNotFound))
		Expect(controllerutil.ContainsFinalizer(topUpOf(waiting), videogenv1alpha1.FinalizerLedger)).To(BeTrue())
		Expect(nc.Delete(ctx, topUpOf(waiting))).To(Succeed())
		Eventually(topUpGone(waiting)).Should(BeTrue(), "a top-up deleted before anything was queued goes")

		// An applied top-up deleted with its namespace: kept while the account lives, let go
		// once the account closes (envtest has no namespace controller: its steps are taken by hand).
		ns := suite.NewAccount(0)
		paid := suite.TopUp(ns, "paid", 100)
		suite.Applied(paid)
		Expect(nc.Delete(ctx, topUpOf(paid))).To(Succeed())
		Expect(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Consistently(func() bool { return topUpGone(paid)() }, "1s").Should(BeFalse(), "kept while the account is open")
		Expect(nc.Delete(ctx, suite.AccountOf(ns))).To(Succeed())
		Eventually(topUpGone(paid)).Should(BeTrue(), "the namespace is being deleted and its account is closing")
	})

	// The finalizer is the operator's: a platform administrator (the videogen-platform-admin
	// role may update top-ups, not write their statuses) cannot take it off, so a top-up whose
	// credit may be queued cannot be made to vanish by hand (pointtopup-finalizer-by-the-manager).
	It("lets no platform administrator take the ledger's finalizer off a top-up", func() {
		startManager(testOptions(testbackend.New()))
		ns := suite.NewAccount(0)
		t := suite.TopUp(ns, "kept", 30)
		Eventually(appliedReason(t)).Should(Equal(videogenv1alpha1.ReasonCredited))
		Expect(topUpOf(t).Finalizers).To(ContainElement(videogenv1alpha1.FinalizerLedger))

		admin := platformAdminClient("adv23-platform-admin")
		held := topUpOf(t)
		stripped := held.DeepCopy()
		controllerutil.RemoveFinalizer(stripped, videogenv1alpha1.FinalizerLedger)
		err := admin.Patch(ctx, stripped, client.MergeFromWithOptions(held, client.MergeFromWithOptimisticLock{}))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a platform administrator took the ledger's finalizer off: %v", err)
		Expect(err.Error()).To(ContainSubstring(videogenv1alpha1.FinalizerLedger))
		Expect(topUpOf(t).Finalizers).To(ContainElement(videogenv1alpha1.FinalizerLedger))
	})
})

// platformAdminClient is a client acting as user, bound cluster-wide to config/rbac's
// platform-admin role.
func platformAdminClient(user string) client.Client {
	root, err := testenv.ModuleRoot()
	Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "platform_admin_role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var role rbacv1.ClusterRole
	Expect(utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&role)).To(Succeed())
	role.Name = "videogen-" + role.Name
	if err := k8sClient.Create(ctx, &role); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}}
	if err := k8sClient.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	admin, err := client.New(c, client.Options{Scheme: k8sClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() error { // the authorizer sees the binding through its informer
		return admin.List(ctx, &videogenv1alpha1.PointTopUpList{})
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	return admin
}

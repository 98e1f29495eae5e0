package controllers_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

var _ = Describe("A tenant with kubectl", func() {
	// Checked against config/rbac and config/policies: the
	// cancel-work finalizer is the only thing that makes deleting a running task stop its work
	// at the backend (finalize runs only for a task being deleted that still carries it), and
	// the tenant roles (videogen-edit: update and patch on videotasks) let a tenant take it off.
	// Interleaving: 1. a tenant's task runs a stage at the backend; the controller put the
	// finalizer on it. 2. The controller does not reconcile the task for a moment (here: the
	// manager is down, as in a failover; in production it is enough that the tenant's two
	// requests, sent back to back, both land before the reconcile their first one queues). 3.
	// The tenant removes the finalizer (kubectl patch --type=json remove
	// /metadata/finalizers) and deletes the task: with no finalizer it goes at once. 4. The
	// manager runs again: there is no task to finalize. The tenant's hold ended with the task
	// (a refund), and the stage runs on at the backend to its deadline (the task's timeout, up to
	// 720h): free work, which the tenant can repeat with the points of one task, each time taking
	// a slot of the shared worker (the reference worker runs 2 at a time) from paying tasks.
	// The fix: a policy (videotask-finalizer-by-the-manager) lets only those who may write task
	// statuses take the finalizer off, as videotask-admission-by-the-ledger does for the
	// admission; a tenant's delete then waits for the controller, which cancels the work.
	It("cannot take the cancel-work finalizer off a running task, so deleting it cancels its work", func() {
		backend := testbackend.New()
		stop := startManager(testOptions(backend))
		ns := suite.NewAccount(100)
		task, _ := aRunningTask(backend, ns, 30)
		Eventually(func() []string { return taskOf(ns, task.Name).Finalizers }).Should(ContainElement(videogenv1alpha1.FinalizerCancelWork))
		suite.ExpectBalanced(ns, 70, 30, 0)
		stop()

		tenant := tenantClient(ns, "adv19-tenant")
		running := taskOf(ns, task.Name)
		stripped := running.DeepCopy()
		stripped.Finalizers = nil
		stripErr := tenant.Patch(ctx, stripped, client.MergeFromWithOptions(running, client.MergeFromWithOptimisticLock{}))
		Expect(tenant.Delete(ctx, running)).To(Succeed())

		startManager(testOptions(backend))
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{}))
		}).Should(BeTrue())
		Expect(backend.WasCanceled(generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageAnalyze))).
			To(BeTrue(), "the deleted task's stage runs on at the backend, unpaid")
		suite.ExpectBalanced(ns, 100, 0, 0)
		Expect(apierrors.IsForbidden(stripErr)).To(BeTrue(), "a tenant took the cancel-work finalizer off a running task: %v", stripErr)
		Expect(stripErr.Error()).To(ContainSubstring(videogenv1alpha1.FinalizerCancelWork))
	})

	// Checked, holds: the tenant roles reach no points and no task status. With the real
	// videogen-edit and videogen-view bound in its namespace, a tenant cannot write a task's
	// status, create a PointTopUp (a credit or a debit), edit or delete its PointAccount, or read
	// or forge a PaymentEvent; it can still run, cancel and delete its tasks.
	It("moves no points by hand", func() {
		startManager(testOptions(testbackend.New()))
		ns := suite.NewAccount(100)
		tenant := tenantClient(ns, "adv19-points")

		topUp := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "free"},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: 1000, Reference: "FREE-1"}}
		Expect(apierrors.IsForbidden(tenant.Create(ctx, topUp))).To(BeTrue(), "a tenant created a PointTopUp")

		var account videogenv1alpha1.PointAccount
		Expect(tenant.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &account)).To(Succeed())
		edited := account.DeepCopy()
		edited.Status.Credited = 1_000_000
		Expect(apierrors.IsForbidden(tenant.Status().Update(ctx, edited))).To(BeTrue(), "a tenant wrote its account's status")
		edited = account.DeepCopy()
		edited.Spec.Suspended = false
		Expect(apierrors.IsForbidden(tenant.Update(ctx, edited))).To(BeTrue(), "a tenant wrote its account")
		Expect(apierrors.IsForbidden(tenant.Delete(ctx, &account))).To(BeTrue(), "a tenant deleted its account")

		event := &videogenv1alpha1.PaymentEvent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged"}}
		Expect(apierrors.IsForbidden(tenant.Create(ctx, event))).To(BeTrue(), "a tenant created a PaymentEvent")
		Expect(apierrors.IsForbidden(tenant.List(ctx, &videogenv1alpha1.PaymentEventList{}, client.InNamespace(ns)))).To(BeTrue())
		Expect(apierrors.IsForbidden(tenant.Create(ctx, &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: "adv19-mine"}}))).
			To(BeTrue(), "a tenant created an official Template")

		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(30).Create()
		task := aShortTask(ns, tmpl).Obj()
		Expect(tenant.Create(ctx, task)).To(Succeed())
		task.Status.Phase = videogenv1alpha1.TaskFailed
		task.Status.Charge = videogenv1alpha1.ChargeRefunded
		Expect(apierrors.IsForbidden(tenant.Status().Update(ctx, task))).To(BeTrue(), "a tenant wrote a task's status")
	})
})

// tenantClient binds the tenant roles of config/rbac (videogen-edit and videogen-view, as
// kustomize's namePrefix names them) to user in ns, and returns a client acting as user.
func tenantClient(ns, user string) client.Client {
	root, err := testenv.ModuleRoot()
	Expect(err).NotTo(HaveOccurred())
	for _, file := range []string{"tenant_edit_role.yaml", "tenant_view_role.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, "config", "rbac", file))
		Expect(err).NotTo(HaveOccurred())
		var role rbacv1.ClusterRole
		Expect(utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&role)).To(Succeed())
		role.Name = "videogen-" + role.Name
		if err := k8sClient.Create(ctx, &role); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + strings.TrimSuffix(file, ".yaml")},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}}
		Expect(k8sClient.Create(ctx, binding)).To(Succeed())
	}
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	tenant, err := client.New(c, client.Options{Scheme: k8sClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	// The authorizer sees the bindings through its informer: wait until the tenant may list.
	Eventually(func() error {
		return tenant.List(ctx, &videogenv1alpha1.VideoTaskList{}, client.InNamespace(ns))
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	return tenant
}

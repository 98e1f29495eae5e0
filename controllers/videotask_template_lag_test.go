package controllers_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

var _ = Describe("VideoTask acceptance", func() {
	It("does not fail a task for a template its cache has not seen yet", func() {
		ns := accountWithoutController(100)
		l, stopLedger := startLedger()
		defer stopLedger()
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		b := aShortTask(ns, tmpl)
		backend := testbackend.New()
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()

		// A cache that has not seen the template yet (created a moment before the task).
		lagging := without[*videogenv1alpha1.Template]("templates")
		got := acceptedBy(directReconciler(lagging, l, backend), task)
		Expect(got.Status.Phase).To(Equal(videogenv1alpha1.TaskRunning), "accepted and dispatched, not failed with template_not_found")
		Expect(got.Status.Charge).To(Equal(videogenv1alpha1.ChargeFrozen))
	})
})

var _ = Describe("VideoTask acceptance of the account's own template", func() {
	It("renders the template the kube-apiserver has, not the old tenant's a lagging cache still holds", func() {
		ns := accountWithoutController(100)
		l, stopLedger := startLedger()
		defer stopLedger()
		const id = "ushort_samekeysamename"
		// The new tenant's template, with the id its Idempotency-Key and namespace name gave
		// it: the old tenant of the name made one with the same key before its namespace went.
		mine := &videogenv1alpha1.ShortTemplate{}
		mine.Namespace, mine.Name = ns, "mine"
		mine.Labels = map[string]string{videogenv1alpha1.LabelShortTemplateID: id}
		mine.Spec = videogenv1alpha1.ShortTemplateSpec{DisplayName: "Mine", TargetURL: "https://media.example/new-tenant.mp4"}
		Expect(k8sClient.Create(ctx, mine)).To(Succeed())
		for _, ref := range []string{id, mine.Name} { // by id (REST, kubectl) and by object name (kubectl)
			b := aShortTask(ns, ref)
			backend := testbackend.New()
			backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
			task := b.Create()

			// A cache still holding the old tenant's template of that id and name.
			got := acceptedBy(directReconciler(holdingOldTenantsTemplate(), l, backend), task)
			Expect(got.Status.Phase).To(Equal(videogenv1alpha1.TaskRunning), "%+v", got.Status.Error)
			Expect(got.Status.TemplateMediaURL).To(Equal("https://media.example/new-tenant.mp4"),
				"a task on %q renders on the old tenant's media", ref)
		}
	})
})

// acceptedBy reconciles task with r until its status shows a phase (until the ledger has seen
// the task, a reconcile asks again shortly), and returns it as stored.
func acceptedBy(r *controllers.VideoTaskReconciler, task *videogenv1alpha1.VideoTask) *videogenv1alpha1.VideoTask {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(taskOf(task.Namespace, task.Name).Status.Phase).NotTo(BeEmpty())
	}).Should(Succeed())
	return taskOf(task.Namespace, task.Name)
}

// holdingOldTenantsTemplate is a client of the test apiserver whose reads of ShortTemplates
// answer with a copy carrying another media URL, as a cache that has not seen a namespace's
// deletion and re-creation answers with the old tenant's template of the same id and name.
func holdingOldTenantsTemplate() client.Client {
	base, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	const old = "https://media.example/old-tenant.mp4"
	return interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			if st, ok := obj.(*videogenv1alpha1.ShortTemplate); ok && err == nil {
				st.Spec.TargetURL = old
			}
			return err
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			err := c.List(ctx, list, opts...)
			if l, ok := list.(*videogenv1alpha1.ShortTemplateList); ok && err == nil {
				for i := range l.Items {
					l.Items[i].Spec.TargetURL = old
				}
			}
			return err
		},
	})
}

// without is a client of the test apiserver whose Gets of T answer NotFound, as a cache that
// does not hold (or has not seen yet) an object of that kind.
func without[T client.Object](resource string) client.Client {
	base, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(T); ok {
				return apierrors.NewNotFound(videogenv1alpha1.GroupVersion.WithResource(resource).GroupResource(), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
}

// accountWithoutController is an account of points whose figures are written straight into its
// status: no controller runs in these tests, only a ledger that reads them.
func accountWithoutController(points int64) string {
	GinkgoHelper()
	ns := suite.NewAccount(0)
	acct := suite.AccountOf(ns)
	acct.Status.Credited, acct.Status.Balance = points, points
	Expect(k8sClient.Status().Update(ctx, acct)).To(Succeed())
	return ns
}

// directReconciler is a VideoTask reconciler called by the test itself (no manager), over c,
// with ledger l and backend for video.short tasks.
func directReconciler(c client.Client, l *ledger.Ledger, backend generation.Backend) *controllers.VideoTaskReconciler {
	return &controllers.VideoTaskReconciler{
		Client: c, APIReader: k8sClient, Ledger: l,
		Backends: generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "test-backend", Backend: backend}},
		Recorder: events.NewFakeRecorder(100), Clock: clocktesting.NewFakePassiveClock(timeNow()),
		Config: controllers.DefaultOptions().Task,
	}
}

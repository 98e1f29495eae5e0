package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// Found by a platform team restoring `kubectl get pointaccounts,pointtopups,videotasks -o yaml`
// into a new cluster: the kube-apiserver drops the status of a create, so every exported
// top-up was credited again (each account got back what it had spent) and every running task
// ran and was charged again. The copies carry the finalizers only the operator puts on.
var _ = Describe("Objects re-created from an export", func() {
	var (
		backend *testbackend.Backend
		stop    func()
	)
	BeforeEach(func() {
		backend = testbackend.New()
		stop = startManager(testOptions(backend))
	})
	AfterEach(func() { stop() })

	// exported is obj as kubectl create -f of an export sends it into namespace ns.
	exported := func(obj metav1.Object, ns string) {
		obj.SetNamespace(ns)
		obj.SetResourceVersion("")
		obj.SetUID("")
		obj.SetCreationTimestamp(metav1.Time{})
		obj.SetManagedFields(nil)
	}

	It("are refused for an applied top-up and a running task, and move no points", func() {
		ns := suite.NewAccount(0)
		paid := suite.TopUp(ns, "inv-1", 100)
		Eventually(appliedReason(paid)).Should(Equal(videogenv1alpha1.ReasonCredited))
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(30).Create()
		b := aShortTask(ns, tmpl)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()
		Eventually(func() []string { return taskOf(ns, task.Name).Finalizers }).Should(ContainElement(videogenv1alpha1.FinalizerCancelWork))

		restored := suite.NewAccount(0)
		copied := topUpOf(paid)
		Expect(copied.Finalizers).To(ContainElement(videogenv1alpha1.FinalizerLedger))
		exported(copied, restored)
		err := k8sClient.Create(ctx, copied)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "an applied top-up's copy was created: %v", err)
		Expect(err.Error()).To(And(ContainSubstring("applied again in full"), ContainSubstring("Backup and migration")))

		run := taskOf(ns, task.Name)
		exported(run, restored)
		err = k8sClient.Create(ctx, run)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a running task's copy was created: %v", err)
		Expect(err.Error()).To(ContainSubstring("run and be charged again"))

		Consistently(func() []int64 {
			st := suite.AccountOf(restored).Status
			return []int64{st.Credited, st.Frozen, st.Spent}
		}, "1s").Should(Equal([]int64{0, 0, 0}))
		suite.ExpectBalanced(ns, 70, 30, 0)
	})
})

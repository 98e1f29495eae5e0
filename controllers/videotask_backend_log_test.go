package controllers_test

import (
	"strings"
	"sync"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// A backend author's tour: a stage refused at Submit (a 4xx, or an answer that breaks the
// protocol) records no backend in the task's status (it has no handle), and its events, shown to
// the task's owner, name none: the manager's log line was the place left to tell which backend
// refused it, and it named none either.
var _ = Describe("The manager's log of a stage a backend ended", func() {
	It("names the backend", func() {
		ns := accountWithoutController(100)
		l, stopLedger := startLedger()
		DeferCleanup(stopLedger)
		backend := testbackend.New()
		r := directReconciler(k8sClient, l, backend)
		b := aShortTask(ns, aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create())
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Refuse})
		task := b.Create()

		var mu sync.Mutex
		var lines []string
		logger := funcr.New(func(_, args string) {
			mu.Lock()
			defer mu.Unlock()
			if strings.Contains(args, "backend ended the stage") {
				lines = append(lines, args)
			}
		}, funcr.Options{})
		Eventually(func(g Gomega) {
			_, err := r.Reconcile(logf.IntoContext(ctx, logger), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		}).Should(Succeed())
		mu.Lock()
		defer mu.Unlock()
		Expect(lines).NotTo(BeEmpty())
		Expect(lines[0]).To(ContainSubstring(`"backend"="test-backend"`))
		Expect(stageOf(taskOf(ns, task.Name), videogenv1alpha1.StageAnalyze).Handle).To(BeEmpty(), "refused at Submit")
	})
})

package controllers_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

var _ = Describe("Templates", func() {
	It("say whether a backend serves their capability, and what a task costs", func() {
		opts := testOptions(nil)
		opts.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "face-swapper", Backend: testbackend.New()}}
		stop := startManager(opts)
		defer stop()

		served := aTemplate(videogenv1alpha1.CapabilityShort).Price(30).Create()
		adjustable := aTemplate(videogenv1alpha1.CapabilityTemplate).Adjustable(2, 10, map[string]int64{"5": 12}).Create()
		ready := func(name string) func(Gomega) *metav1.Condition {
			return func(g Gomega) *metav1.Condition {
				t := &videogenv1alpha1.Template{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, t)).To(Succeed())
				c := meta.FindStatusCondition(t.Status.Conditions, videogenv1alpha1.ConditionReady)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.ObservedGeneration).To(Equal(t.Generation))
				return c
			}
		}
		Eventually(ready(served)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", controllers.ReasonServed),
			HaveField("Message", "face-swapper serves video.short; 30 points a task")))
		Eventually(ready(adjustable)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", videogenv1alpha1.ReasonNoBackend),
			HaveField("Message", ContainSubstring("no generation backend serves video.template"))))
		// The PRICE column of `kubectl get templates`, the default price included.
		price := func(name string) func(Gomega) string {
			return func(g Gomega) string {
				t := &videogenv1alpha1.Template{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, t)).To(Succeed())
				return t.Status.Price
			}
		}
		Eventually(price(served)).Should(Equal("30"))
		Eventually(price(adjustable)).Should(Equal(fmt.Sprintf("5s=12, others %d (default)", opts.Task.DefaultPrice)))
		// What the "tasks wait with no backend" alert reads.
		Expect(metricValue("videogen_capability_served", map[string]string{"capability": "video.short"})).To(Equal(1.0))
		Expect(metricValue("videogen_capability_served", map[string]string{"capability": "video.template"})).To(Equal(0.0))
	})
})

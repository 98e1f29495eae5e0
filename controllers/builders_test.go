package controllers_test

import (
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

// templateBuilder makes official Templates.
type templateBuilder struct{ t videogenv1alpha1.Template }

func aTemplate(capability videogenv1alpha1.Capability) *templateBuilder {
	return &templateBuilder{t: videogenv1alpha1.Template{
		ObjectMeta: metav1.ObjectMeta{Name: envsuite.Unique("tmpl")},
		Spec: videogenv1alpha1.TemplateSpec{Capability: capability, DisplayName: "Test template",
			MediaURL: "https://media.example/template.mp4"},
	}}
}

func (b *templateBuilder) Price(p int64) *templateBuilder { b.t.Spec.Price = ptr.To(p); return b }

func (b *templateBuilder) Adjustable(lo, hi int32, prices map[string]int64) *templateBuilder {
	b.t.Spec.DurationAdjustable = true
	b.t.Spec.MinDuration, b.t.Spec.MaxDuration = ptr.To(lo), ptr.To(hi)
	b.t.Spec.DurationPrices = prices
	return b
}

func (b *templateBuilder) Create() string {
	Expect(k8sClient.Create(ctx, &b.t)).To(Succeed())
	return b.t.Name
}

// aRunningTask creates a short task in ns on a new template of price whose analyze stage runs
// at backend until it is cancelled, and waits until the task runs. It returns the task and the
// template.
func aRunningTask(backend *testbackend.Backend, ns string, price int64) (*videogenv1alpha1.VideoTask, string) {
	tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(price).Create()
	b := aShortTask(ns, tmpl)
	backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
	task := b.Create()
	Eventually(func() videogenv1alpha1.TaskPhase { return taskOf(ns, task.Name).Status.Phase }).Should(Equal(videogenv1alpha1.TaskRunning))
	return task, tmpl
}

// taskBuilder makes VideoTasks.
type taskBuilder struct{ t videogenv1alpha1.VideoTask }

func aShortTask(ns, template string) *taskBuilder {
	return &taskBuilder{t: videogenv1alpha1.VideoTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: envsuite.Unique("task")},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityShort, TemplateRef: template,
			Inputs: videogenv1alpha1.TaskInputs{FaceImageURL: "https://media.example/face.jpg"}},
	}}
}

func (b *taskBuilder) Capability(c videogenv1alpha1.Capability) *taskBuilder {
	b.t.Spec.Capability = c
	return b
}

func (b *taskBuilder) Duration(d int32) *taskBuilder { b.t.Spec.Duration = ptr.To(d); return b }

func (b *taskBuilder) Timeout(d time.Duration) *taskBuilder {
	b.t.Spec.Timeout = &metav1.Duration{Duration: d}
	return b
}

func (b *taskBuilder) Name() string { return b.t.Name }

func (b *taskBuilder) Obj() *videogenv1alpha1.VideoTask { return b.t.DeepCopy() }

func (b *taskBuilder) Create() *videogenv1alpha1.VideoTask {
	t := b.t.DeepCopy()
	Expect(k8sClient.Create(ctx, t)).To(Succeed())
	return t
}

func taskOf(ns, name string) *videogenv1alpha1.VideoTask {
	t := &videogenv1alpha1.VideoTask{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, t)).To(Succeed())
	return t
}

// finished waits until the task is terminal with its points settled (or never charged).
func finished(ns, name string) *videogenv1alpha1.VideoTask {
	var t *videogenv1alpha1.VideoTask
	Eventually(func(g Gomega) {
		t = taskOf(ns, name)
		g.Expect(t.Status.Phase.Terminal()).To(BeTrue(), "phase %q", t.Status.Phase)
		g.Expect(t.Status.Charge).NotTo(Equal(videogenv1alpha1.ChargeFrozen))
	}).Should(Succeed())
	return t
}

func timeNow() time.Time { return time.Now() }

package controllers_test

import (
	"context"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

var _ = Describe("VideoTask template media", func() {
	var backend *recordingBackend
	BeforeEach(func() {
		backend = &recordingBackend{Backend: testbackend.New(), submitted: map[string]generation.Work{}}
		startManager(testOptions(backend))
	})

	// runsOnAcceptedMedia runs a task on ref whose analyze stage waits until edit has changed the
	// template's media to edited (and the manager's cache has seen it, as seen says), then checks
	// that both stages were dispatched with the media the task was accepted with, said to be an
	// official template's or not as official says (only an official one's may be on the
	// service's network), even after the official template's media moved.
	runsOnAcceptedMedia := func(ns, ref, original, edited string, official bool, edit func(), seen func(Gomega)) {
		GinkgoHelper()
		b := aShortTask(ns, ref)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()
		Eventually(func() videogenv1alpha1.TaskPhase { return taskOf(ns, task.Name).Status.Phase }).Should(Equal(videogenv1alpha1.TaskRunning))
		Expect(taskOf(ns, task.Name).Status.TemplateMediaURL).To(Equal(original), "recorded at acceptance")
		Expect(taskOf(ns, task.Name).Status.TemplateMediaOfficial).To(Equal(official), "recorded at acceptance")

		edit()
		Eventually(seen).Should(Succeed())
		backend.Set(b.Name(), testbackend.Script{}) // the analyze stage ends; render starts

		done := finished(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%+v", done.Status.Error)
		Expect(done.Status.TemplateMediaURL).To(Equal(original))
		for _, stage := range videogenv1alpha1.Stages {
			w, ok := backend.Submitted(generation.WorkKey(ns, task.Name, string(done.UID), stage))
			Expect(ok).To(BeTrue(), "the %s stage was submitted", stage)
			Expect(w.TemplateMediaURL).To(Equal(original), "the %s stage runs on the media the task was accepted with, not %s", stage, edited)
			Expect(w.TemplateMediaOfficial).To(Equal(official), "the %s stage", stage)
		}
	}

	It("dispatches every stage with the official template's media as it was when the task was accepted", func() {
		ns := suite.NewAccount(100)
		const original, edited = "https://media.example/portrait.mp4", "https://media.example/noface.mp4"
		tb := aTemplate(videogenv1alpha1.CapabilityShort).Price(10)
		tb.t.Spec.MediaURL = original
		name := tb.Create()
		tmpl := &videogenv1alpha1.Template{}
		runsOnAcceptedMedia(ns, name, original, edited, true, func() {
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, tmpl)).To(Succeed())
			patch := client.MergeFrom(tmpl.DeepCopy())
			tmpl.Spec.MediaURL = edited
			Expect(k8sClient.Patch(ctx, tmpl, patch)).To(Succeed())
		}, func(g Gomega) {
			got := &videogenv1alpha1.Template{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, got)).To(Succeed())
			ready := meta.FindStatusCondition(got.Status.Conditions, videogenv1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.ObservedGeneration).To(Equal(tmpl.Generation), "the manager saw the edit")
		})
		suite.ExpectBalanced(ns, 90, 0, 10)
	})

	It("dispatches every stage with a ushort_ template's target as it was when the task was accepted", func() {
		ns := suite.NewAccount(100)
		const original, edited = "https://media.example/portrait.mp4", "https://media.example/noface.mp4"
		st := &videogenv1alpha1.ShortTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "swap"},
			Spec: videogenv1alpha1.ShortTemplateSpec{DisplayName: "swap", TargetURL: original}}
		Expect(k8sClient.Create(ctx, st)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(st), st)).To(Succeed())
			g.Expect(st.Status.ID).To(HavePrefix(videogenv1alpha1.ShortTemplateIDPrefix))
		}).Should(Succeed())
		runsOnAcceptedMedia(ns, st.Status.ID, original, edited, false, func() {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(st), st)).To(Succeed())
			patch := client.MergeFrom(st.DeepCopy())
			st.Spec.TargetURL = edited
			Expect(k8sClient.Patch(ctx, st, patch)).To(Succeed())
		}, func(g Gomega) {
			got := &videogenv1alpha1.ShortTemplate{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(st), got)).To(Succeed())
			g.Expect(got.Status.ObservedGeneration).To(Equal(st.Generation), "the manager saw the edit")
		})
		suite.ExpectBalanced(ns, 90, 0, 10)
	})
})

// recordingBackend is the test backend that also keeps the work each stage was submitted with.
type recordingBackend struct {
	*testbackend.Backend
	mu        sync.Mutex
	submitted map[string]generation.Work // the last submission, by work key
}

func (b *recordingBackend) Submit(ctx context.Context, w generation.Work) (string, error) {
	b.mu.Lock()
	b.submitted[w.Key] = w
	b.mu.Unlock()
	return b.Backend.Submit(ctx, w)
}

// Submitted returns the work last submitted under key.
func (b *recordingBackend) Submitted(key string) (generation.Work, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, ok := b.submitted[key]
	return w, ok
}

package jobbackend_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/jobbackend"
	"github.com/videogen-dev/videogen-operator/internal/jobtest"
)

var _ = Describe("the Job backend behind the manager's cache", func() {
	It("reads its Jobs and pods through a cache that holds only those", func() {
		config, err := jobbackend.ParseConfig([]byte(jobtest.Config))
		Expect(err).NotTo(HaveOccurred())
		informers, err := cache.New(cfg, cache.Options{Scheme: env.Scheme, ByObject: config.CacheByObject()})
		Expect(err).NotTo(HaveOccurred())
		cacheCtx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		go func() {
			defer GinkgoRecover()
			Expect(informers.Start(cacheCtx)).To(Succeed())
		}()
		cached, err := client.New(cfg, client.Options{Scheme: env.Scheme, Cache: &client.CacheOptions{Reader: informers}})
		Expect(err).NotTo(HaveOccurred())
		backend, err := jobbackend.New(cached, config)
		Expect(err).NotTo(HaveOccurred())

		ns := newNamespace()
		task := newTask(ns, "cached")
		w := workFor(task, videogenv1alpha1.StageAnalyze)
		handle, err := backend.Submit(ctx, w)
		Expect(err).NotTo(HaveOccurred())

		// Right after Submit the cache may not have the Job yet: that is not a deleted Job.
		obs, err := backend.Observe(ctx, w, handle)
		Expect(err).NotTo(HaveOccurred())
		Expect(obs.State).To(Equal(generation.Running))

		job := getJob(handle)
		createJobPod(job, "a", podStatus{phase: corev1.PodSucceeded, message: `{"outputs":{"faces":"2"}}`})
		completeJob(job)
		Eventually(func(g Gomega) {
			obs, err := backend.Observe(ctx, w, handle)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(obs.State).To(Equal(generation.Succeeded))
			g.Expect(obs.Outputs).To(HaveKeyWithValue("faces", "2"))
		}).Should(Succeed())

		other := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}},
		}
		Expect(k8sClient.Create(ctx, other)).To(Succeed())
		Consistently(func() error {
			return cached.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Pod{})
		}, "500ms").Should(HaveOccurred(), "the cache holds pods the backend did not start")
	})
})

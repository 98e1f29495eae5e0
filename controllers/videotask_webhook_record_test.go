package controllers_test

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// The two ends of the window between
// a completion webhook's POST and the status write that records it, against a real
// kube-apiserver. docs/api.md promises "at least once" and "a manager restart loses no
// delivery"; the existing specs restart the manager only after the record landed.
var _ = Describe("The record of a completion webhook", func() {
	// The spec's account, once made: the manager also sees tasks that earlier specs left with a
	// delivery pending, whose records pass through the same interceptor.
	var (
		mu      sync.Mutex
		account string
	)
	watch := func(ns string) { mu.Lock(); defer mu.Unlock(); account = ns }
	// webhookRecord tells the webhook controller's status write of a task of the spec's account
	// (the only write that sets status.webhook) from every other.
	webhookRecord := func(obj client.Object) bool {
		t, ok := obj.(*videogenv1alpha1.VideoTask)
		mu.Lock()
		defer mu.Unlock()
		return ok && t.Status.Webhook != nil && t.Namespace == account
	}

	It("is delivered again by the next manager when the one that posted it died before the record landed", func() {
		// Interleaving: the receiver answers 200; the manager dies before its status write
		// reaches the kube-apiserver (here the write waits until the manager is stopped and
		// is never sent). The next elected manager finds the task pending, as if nothing was
		// sent, and must send it again, under the same webhook-id and validly signed.
		backend := testbackend.New()
		var once sync.Once
		died := make(chan struct{})
		stop := startManager(testOptions(backend), intercepted(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if webhookRecord(obj) {
					once.Do(func() { close(died) })
					<-ctx.Done() // the manager is gone before the write leaves it
					return ctx.Err()
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}))
		ns := suite.NewAccount(100)
		watch(ns)
		recv := newTaskReceiver(ns)
		task := taskWithWebhook(ns, recv.server.URL+"/hooks", testbackend.Script{}, backend)
		Eventually(died).Should(BeClosed())
		stop()
		Expect(recv.deliveries()).To(HaveLen(1))
		Expect(webhookOf(ns, task.Name)).To(BeNil(), "the record never landed")

		startManager(testOptions(backend))
		Eventually(func() int { return len(recv.deliveries()) }).Should(Equal(2), "at least once: the next manager sends it again")
		for _, d := range recv.deliveries() {
			Expect(d.id).To(Equal(controllers.WebhookID(task)), "the same webhook-id, so the receiver can tell it is a repeat")
			Expect(d.verified).NotTo(HaveOccurred())
		}
		Eventually(func() *videogenv1alpha1.WebhookDelivery { return webhookOf(ns, task.Name) }).Should(And(
			Not(BeNil()), HaveField("State", videogenv1alpha1.WebhookDelivered), HaveField("Attempts", BeNumerically("==", 1))))
		Eventually(func() bool { return taskOf(ns, task.Name).Status.Closed }).Should(BeTrue())
		Consistently(func() int { return len(recv.deliveries()) }, time.Second).Should(Equal(2))
	})

	It("is kept, and not sent again, when its write lands but the kube-apiserver answers 504", func() {
		// Interleaving: the receiver answers 200; the status write recording it is stored, and
		// its answer is the kube-apiserver's 504 Timeout Status (an apiserver under load). The
		// reconcile must see that what landed is its record: Delivered, closed, one POST.
		backend := testbackend.New()
		var timedOut atomic.Int32
		startManager(testOptions(backend), intercepted(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if err := c.SubResource(sub).Update(ctx, obj, opts...); err != nil || !webhookRecord(obj) {
					return err
				}
				if timedOut.Add(1) > 1 {
					return nil
				}
				return apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)
			},
		}))
		ns := suite.NewAccount(100)
		watch(ns)
		recv := newTaskReceiver(ns)
		task := taskWithWebhook(ns, recv.server.URL+"/hooks", testbackend.Script{}, backend)
		Eventually(func() *videogenv1alpha1.WebhookDelivery { return webhookOf(ns, task.Name) }).Should(And(
			Not(BeNil()), HaveField("State", videogenv1alpha1.WebhookDelivered), HaveField("Attempts", BeNumerically("==", 1))))
		Expect(taskOf(ns, task.Name).Status.Closed).To(BeTrue())
		Consistently(func() int { return len(recv.deliveries()) }, 2*time.Second).Should(Equal(1), "a record that landed is not sent again")
		Expect(timedOut.Load()).To(BeNumerically("==", 1), "the record's write was made once, and answered 504")
	})
})

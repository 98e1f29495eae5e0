package controllers_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/accountns"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

// A deleted account's API keys and webhook signing Secret, in the operator's namespace, go with
// it: once its namespace is gone (NotFound, or another of the name), not while it is being
// deleted, and never one written for the new namespace meanwhile.
var _ = Describe("The Secrets of a deleted account", func() {
	var store *webhooksecrets.Store
	BeforeEach(func() {
		store = &webhooksecrets.Store{Client: k8sClient, Reader: k8sClient, Namespace: webhookSecretNamespace}
	})

	newNamespace := func() string {
		GinkgoHelper()
		ns := envsuite.Unique("orphans")
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		return ns
	}
	// issue returns the name of the Secret of a new API key of account ns.
	issue := func(ns string) string {
		GinkgoHelper()
		_, k, err := apikeys.Issue(ctx, k8sClient, webhookSecretNamespace, ns, "test")
		Expect(err).NotTo(HaveOccurred())
		return apikeys.SecretName(k.ID)
	}
	signing := func(ns string) string {
		GinkgoHelper()
		_, err := store.Ensure(ctx, ns)
		Expect(err).NotTo(HaveOccurred())
		return webhooksecrets.SecretName(ns)
	}
	secret := func(name string) (*corev1.Secret, error) {
		s := &corev1.Secret{}
		return s, k8sClient.Get(ctx, client.ObjectKey{Namespace: webhookSecretNamespace, Name: name}, s)
	}
	gone := func(name string) func() bool {
		return func() bool { _, err := secret(name); return apierrors.IsNotFound(err) }
	}
	// reconcile runs the reconciler once on Secret name, reading around every cache (through c
	// for its delete, k8sClient if nil).
	reconcile := func(name string, c client.Client) (ctrl.Result, error) {
		if c == nil {
			c = k8sClient
		}
		r := &controllers.OrphanedSecretReconciler{Client: c, Secrets: k8sClient, APIReader: k8sClient, Namespace: webhookSecretNamespace}
		return r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: webhookSecretNamespace, Name: name}})
	}
	expectKept := func(names ...string) {
		GinkgoHelper()
		for _, name := range names {
			_, err := reconcile(name, nil)
			Expect(err).NotTo(HaveOccurred())
			_, err = secret(name)
			Expect(err).NotTo(HaveOccurred(), "Secret %s", name)
		}
	}

	It("are deleted by the manager once their namespace is deleted", func() {
		startManager(testOptions(testbackend.New()))
		ns := newNamespace()
		key, sig := issue(ns), signing(ns)
		Expect(testenv.RemoveNamespace(ctx, k8sClient, ns)).To(Succeed())
		Eventually(gone(key), 10*time.Second).Should(BeTrue(), "the API key's Secret")
		Eventually(gone(sig), 10*time.Second).Should(BeTrue(), "the signing Secret")
	})

	It("are deleted when a manager starts, when the namespace of the name is another, and the new namespace's are kept", func() {
		// Orphaned while no manager ran: the namespace deleted and made again (another UID).
		ns := newNamespace()
		oldKey, sig := issue(ns), signing(ns)
		Expect(testenv.RemoveNamespace(ctx, k8sClient, ns)).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		newKey := issue(ns)
		startManager(testOptions(testbackend.New()))
		Eventually(gone(oldKey), 10*time.Second).Should(BeTrue(), "the earlier namespace's API key")
		Eventually(gone(sig), 10*time.Second).Should(BeTrue(), "the earlier namespace's signing Secret")
		expectKept(newKey, signing(ns))
	})

	It("are kept while the namespace exists, without a PointAccount or being deleted, and a key from before the UID annotation too", func() {
		ns := newNamespace()
		key, sig := issue(ns), signing(ns)
		// A key issued before keys recorded their namespace's UID, after its namespace was made.
		legacy := apikeys.SecretName("0123456789ab")
		Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Namespace: webhookSecretNamespace, Name: legacy,
			Labels: map[string]string{apikeys.LabelAPIKey: "true", apikeys.LabelAccount: ns, apikeys.LabelKeyID: "0123456789ab"},
		}})).To(Succeed())
		DeferCleanup(func() {
			_ = k8sClient.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: webhookSecretNamespace, Name: legacy}})
		})
		expectKept(key, sig, legacy)

		// Terminating: its tasks' completion webhooks may still be signed while they finish.
		Expect(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		expectKept(key, sig, legacy)

		Expect(testenv.RemoveNamespace(ctx, k8sClient, ns)).To(Succeed())
		for _, name := range []string{key, sig, legacy} {
			_, err := reconcile(name, nil)
			Expect(err).NotTo(HaveOccurred())
			Expect(gone(name)()).To(BeTrue(), "Secret %s once its namespace is gone", name)
		}
	})

	It("does not delete a signing Secret replaced for the new namespace after it was judged", func() {
		ns := newNamespace()
		sig := signing(ns)
		Expect(testenv.RemoveNamespace(ctx, k8sClient, ns)).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		// Interleaving: judged on the earlier namespace's Secret; before its delete goes out, a
		// completion webhook of the new namespace has Ensure replace it in place, for that one.
		var replaced webhooksecrets.Secrets
		direct, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		c := interceptor.NewClient(direct, interceptor.Funcs{
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				var err error
				replaced, err = store.Ensure(ctx, ns)
				Expect(err).NotTo(HaveOccurred())
				return c.Delete(ctx, obj, opts...)
			},
		})
		res, err := reconcile(sig, c)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.RequeueAfter).To(BeNumerically(">", 0), "judged again after the conflict")
		Expect(replaced.Current).NotTo(BeEmpty())

		// Judged again, it is the new namespace's, and kept.
		expectKept(sig)
		s, _ := secret(sig)
		n := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, n)).To(Succeed())
		Expect(accountns.MadeFor(s, n)).To(BeTrue())
		Expect(store.Ensure(ctx, ns)).To(Equal(replaced), "the new namespace's secret, as handed out")
	})
})

package apiserver_test

import (
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

var _ = Describe("The webhook signing secret of a namespace made again under a deleted one's name", func() {
	It("is a new secret, not the one the deleted namespace's tenant holds", func() {
		ns := envsuite.Unique("reused")
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: objectMeta(ns)})).To(Succeed())
		key, _, err := apikeys.Issue(ctx, k8sClient, keyNamespace, ns, "first tenant")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() int { return api.get("/v1/webhook-secret", key).Status }).Should(Equal(http.StatusOK))
		first := api.get("/v1/webhook-secret", key).JSON()["secret"]
		rotated := api.post("/v1/webhook-secret/rotate", key, nil).JSON()["secret"]

		// The namespace is deleted (envtest has no namespace controller: it is finalized here)
		// and one of the same name made for another tenant. The operator's Secret stays, as
		// it does when an administrator forgets to delete it.
		Expect(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: objectMeta(ns)})).To(Succeed())
		clientset, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		gone := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, gone)).To(Succeed())
		gone.Spec.Finalizers = nil
		_, err = clientset.CoreV1().Namespaces().Finalize(ctx, gone, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
		}).Should(BeTrue())
		again := &corev1.Namespace{ObjectMeta: objectMeta(ns)}
		Expect(k8sClient.Create(ctx, again)).To(Succeed())
		Expect(again.UID).NotTo(Equal(gone.UID))

		// The first tenant's key is still there too (the operator forgot it as well); the
		// second tenant's is another, for the same account name.
		second, _, err := apikeys.Issue(ctx, k8sClient, keyNamespace, ns, "second tenant")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() int { return api.get("/v1/webhook-secret", second).Status }).Should(Equal(http.StatusOK))
		got := api.get("/v1/webhook-secret", second).JSON()
		Expect(got["secret"]).To(HavePrefix("whsec_"))
		Expect(got["secret"]).NotTo(BeElementOf(first, rotated))
		Expect(got["previous_secret"]).To(BeNil(), "none of the first tenant's secrets signs for the second")
		Expect(api.get("/v1/webhook-secret", second).JSON()["secret"]).To(Equal(got["secret"]))

		sec := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: keyNamespace, Name: webhooksecrets.SecretName(ns)}, sec)).To(Succeed())
		Expect(sec.Annotations).To(HaveKeyWithValue(webhooksecrets.AnnotationAccountUID, string(again.UID)))
	})
})

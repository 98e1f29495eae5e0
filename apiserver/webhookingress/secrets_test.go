package webhookingress_test

import (
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/videogen-dev/videogen-operator/apiserver/connectorsecrets"
)

var _ = Describe("Connector secrets from Kubernetes Secrets", func() {
	It("verifies with the labelled Secret and follows a rotation without a restart", func() {
		ns := newNamespace("secrets")
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stripe-webhook",
				Labels: map[string]string{connectorsecrets.LabelConnector: "stripe"}},
			StringData: map[string]string{connectorsecrets.KeySecret: "whsec_old\n"},
		}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		// An unlabelled Secret is neither watched nor used.
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"},
			StringData: map[string]string{connectorsecrets.KeySecret: "whsec_unrelated"},
		})).To(Succeed())

		src, err := connectorsecrets.Start(ctx, cfg, ns)
		Expect(err).NotTo(HaveOccurred())
		in := startIngress(ns, src)

		Expect(in.postStripe(stripeEvent("evt_old"), "whsec_old").status).To(Equal(http.StatusOK))
		Expect(in.postStripe(stripeEvent("evt_unrelated"), "whsec_unrelated").status).To(Equal(http.StatusUnauthorized))

		By("rotating: the new secret is added while the old one stays accepted")
		secret.StringData = map[string]string{connectorsecrets.KeySecret: "whsec_new", connectorsecrets.KeyAdditionalSecret: "whsec_old"}
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		Eventually(func() int { return in.postStripe(stripeEvent("evt_new_1"), "whsec_new").status }).
			WithTimeout(5 * time.Second).Should(Equal(http.StatusOK))
		Expect(in.postStripe(stripeEvent("evt_old_2"), "whsec_old").status).To(Equal(http.StatusOK))

		By("finishing the rotation: the old secret is removed")
		secret.StringData = nil
		secret.Data = map[string][]byte{connectorsecrets.KeySecret: []byte("whsec_new")}
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		Eventually(func() int { return in.postStripe(stripeEvent("evt_old_3"), "whsec_old").status }).
			WithTimeout(5 * time.Second).Should(Equal(http.StatusUnauthorized))

		By("deleting the Secret: no secret is configured any more")
		Expect(k8sClient.Delete(ctx, secret)).To(Succeed())
		Eventually(func() string { return in.postStripe(stripeEvent("evt_none"), "whsec_new").err.Message }).
			WithTimeout(5 * time.Second).Should(ContainSubstring("no webhook secret configured"))
	})
})

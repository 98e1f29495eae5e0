package webhookingress_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

var _ = Describe("The samples", func() {
	It("are accepted by the PaymentEvent CRD and as a connector Secret", func() {
		ns := newNamespace("samples")
		samples := filepath.Join("..", "..", "config", "samples")

		raw, err := os.ReadFile(filepath.Join(samples, "videogen_v1alpha1_paymentevent.yaml"))
		Expect(err).NotTo(HaveOccurred())
		pe := &videogenv1alpha1.PaymentEvent{}
		Expect(yaml.UnmarshalStrict(raw, pe)).To(Succeed())
		pe.Namespace = ns
		Expect(k8sClient.Create(ctx, pe)).To(Succeed())

		raw, err = os.ReadFile(filepath.Join(samples, "webhook_connector_secret.yaml"))
		Expect(err).NotTo(HaveOccurred())
		secret := &corev1.Secret{}
		Expect(yaml.UnmarshalStrict(raw, secret)).To(Succeed())
		secret.Namespace = ns
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
	})
})

package e2e

import (
	"encoding/json"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

var _ = Describe("An account namespace deleted and made again under its name", func() {
	// The next tenant of a name must not inherit the last one's API keys (they would spend its
	// points) or webhook signing secret (it could forge webhooks to its receiver): both belong
	// to the namespace's UID, and the manager deletes both once it is gone. Only a cluster with
	// a namespace controller deletes a namespace.
	It("takes neither the old tenant's API keys nor its signing secret", func() {
		if sys.mode != "kind" {
			Skip("the local stack runs no namespace controller: a deleted namespace stays Terminating")
		}
		old := newAccount(0)
		oldSecret := call("GET", "/v1/webhook-secret", old.key, nil).json()["secret"]
		Expect(oldSecret).NotTo(BeNil())

		By("deleting the namespace, as kubectl delete namespace does, and waiting until it is gone")
		ns := &corev1.Namespace{}
		Expect(sys.k8s.Get(ctx, client.ObjectKey{Name: old.name}, ns)).To(Succeed())
		Expect(sys.k8s.Delete(ctx, ns)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(sys.k8s.Get(ctx, client.ObjectKey{Name: old.name}, &corev1.Namespace{}))
		}).Should(BeTrue(), "the namespace of an empty account goes")
		Eventually(func() int { return call("GET", "/v1/balance", old.key, nil).status }).Should(Equal(http.StatusUnauthorized))

		By("the manager deleting the old tenant's API key and signing secret")
		oldID, _ := apikeys.IDOf(old.key)
		for _, name := range []string{apikeys.SecretName(oldID), webhooksecrets.SecretName(old.name)} {
			Eventually(func() bool {
				return apierrors.IsNotFound(sys.k8s.Get(ctx, client.ObjectKey{Namespace: sys.systemNS, Name: name}, &corev1.Secret{}))
			}).Should(BeTrue(), "Secret %s of the deleted namespace", name)
		}

		By("making an account of the same name for another tenant")
		out, err := cli("account", "create", old.name)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = cli("apikey", "create", "--account", old.name, "-o", "json")
		Expect(err).NotTo(HaveOccurred(), out)
		var issued map[string]string
		Expect(json.Unmarshal([]byte(out), &issued)).To(Succeed(), out)
		Eventually(func() int { return call("GET", "/v1/balance", issued["key"], nil).status }).Should(Equal(http.StatusOK))

		r := call("GET", "/v1/balance", old.key, nil)
		Expect(r.status).To(Equal(http.StatusUnauthorized), "the old tenant's key: %s", r.body)
		secret := call("GET", "/v1/webhook-secret", issued["key"], nil).json()
		Expect(secret["secret"]).NotTo(Equal(oldSecret), "the new tenant signs with a secret of its own")
		Expect(secret["previous_secret"]).To(BeNil(), "and none of the old tenant's")

		By("apikey list showing only the new tenant's key")
		out, err = cli("apikey", "list", "-n", old.name)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(issued["id"]))
		Expect(out).NotTo(ContainSubstring(oldID))
	})
})

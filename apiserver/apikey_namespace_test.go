package apiserver_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

// Interleaving: 1. keys are issued for namespace X (tenant A). 2. X is deleted, and nobody
// revokes them. 3. a namespace X is made, for tenant B. 4. A's keys are presented. They were
// B's account; they are 401 invalid_api_key now, and keys issued for the new X work.
var _ = Describe("API keys of a namespace deleted and re-created under its name", func() {
	It("refuses the old namespace's keys and accepts the new one's", func() {
		ns := envsuite.Unique("recreated")
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: objectMeta(ns)})).To(Succeed())
		oldKey := issueWorkingKey(ns)
		oldLegacy, legacySecret := legacyKey(ns)

		Expect(testenv.RemoveNamespace(ctx, k8sClient, ns)).To(Succeed())
		expectInvalidKey(oldKey)
		// The new X is created in a later second than the legacy key: else it could have been
		// issued for the new one, which the kube-apiserver's seconds do not tell.
		var created corev1.Namespace
		for {
			created = corev1.Namespace{ObjectMeta: objectMeta(ns)}
			Expect(k8sClient.Create(ctx, &created)).To(Succeed())
			if created.CreationTimestamp.After(legacySecret.CreationTimestamp.Time) {
				break
			}
			Expect(testenv.RemoveNamespace(ctx, k8sClient, ns)).To(Succeed())
		}

		expectInvalidKey(oldKey)
		expectInvalidKey(oldLegacy)
		// A key issued for the new X works: the namespace has no PointAccount, which the
		// apiserver tells only to an authenticated key.
		newKey := issueWorkingKey(ns)
		newLegacy, _ := legacyKey(ns)
		for _, key := range []string{newKey, newLegacy} {
			Expect(api.get("/v1/balance", key).ErrorCode()).To(Equal("account_not_found"))
		}
	})
})

// issueWorkingKey issues a key for namespace ns and waits until the apiserver accepts it.
func issueWorkingKey(ns string) string {
	GinkgoHelper()
	key, _, err := apikeys.Issue(ctx, k8sClient, keyNamespace, ns, "test key")
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() int { return api.get("/v1/balance", key).Status }).ShouldNot(Equal(http.StatusUnauthorized))
	return key
}

// legacyKey stores a key for namespace ns as Issue did before it recorded the namespace's UID
// (no videogen.dev/account-uid), waits until the apiserver accepts it, and returns it with its
// Secret.
func legacyKey(ns string) (string, *corev1.Secret) {
	GinkgoHelper()
	id := fmt.Sprintf("%012x", legacySeq.Add(1))
	key := "vg_" + id + "_" + strings.Repeat("k", 43)
	sum := sha256.Sum256([]byte(key))
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: apikeys.SecretName(id), Namespace: keyNamespace,
			Labels: map[string]string{apikeys.LabelAPIKey: "true", apikeys.LabelAccount: ns, apikeys.LabelKeyID: id}},
		Data: map[string][]byte{"sha256": []byte(hex.EncodeToString(sum[:]))},
	}
	Expect(k8sClient.Create(ctx, s)).To(Succeed())
	Eventually(func() int { return api.get("/v1/balance", key).Status }).ShouldNot(Equal(http.StatusUnauthorized))
	return key, s
}

var legacySeq atomic.Int64

// expectInvalidKey waits until the apiserver answers key 401 invalid_api_key.
func expectInvalidKey(key string) {
	GinkgoHelper()
	Eventually(func() string {
		resp := api.get("/v1/balance", key)
		if resp.Status != http.StatusUnauthorized {
			return http.StatusText(resp.Status)
		}
		return resp.ErrorCode()
	}).Should(Equal("invalid_api_key"))
}

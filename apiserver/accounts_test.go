package apiserver_test

import (
	"fmt"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

var _ = Describe("Accounts that may not submit", func() {
	var tmpl string
	BeforeEach(func() {
		tmpl = template(videogenv1alpha1.CapabilityShort, ptr.To[int64](10), nil)
	})

	DescribeTable("refuses a suspended account with 403 account_suspended, moving nothing, until it is resumed",
		func(server func() *apiClient) {
			a := newAccount(100)
			setSuspended(a.ns, true)
			srv := server()
			body := map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"}

			resp := srv.post("/v1/videos/short", a.key, body, "Idempotency-Key", "while-suspended")
			Expect(resp.Status).To(Equal(http.StatusForbidden), string(resp.Body))
			Expect(resp.ErrorCode()).To(Equal("account_suspended"))
			Expect(resp.Message()).To(ContainSubstring("suspended"))
			Expect(tasksIn(a.ns)).To(BeEmpty())
			Expect(suite.AccountOf(a.ns).Status.Holds).To(BeZero())
			suite.ExpectBalanced(a.ns, 100, 0, 0)

			// The refusal left the key free: once resumed, the same request goes through.
			setSuspended(a.ns, false)
			again := srv.post("/v1/videos/short", a.key, body, "Idempotency-Key", "while-suspended")
			Expect(again.Status).To(Equal(http.StatusAccepted), string(again.Body))
			expectCharged(a.ns, 90, 10)
		},
		Entry("through one replica", firstReplica),
		Entry("through another replica", secondReplica),
	)

	DescribeTable("refuses a key whose account has no PointAccount with 403 account_not_found, creating nothing",
		func(server func() *apiClient) {
			a := accountWithoutPoints()
			srv := server()
			resp := srv.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"},
				"Idempotency-Key", "no-points-account")
			Expect(resp.Status).To(Equal(http.StatusForbidden), string(resp.Body))
			Expect(resp.ErrorCode()).To(Equal("account_not_found"))
			Expect(resp.Message()).To(ContainSubstring("no points account"))
			Expect(tasksIn(a.ns)).To(BeEmpty())
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: a.ns, Name: videogenv1alpha1.PointAccountName}, &videogenv1alpha1.PointAccount{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no PointAccount was made on the way: %v", err)
		},
		Entry("through one replica", firstReplica),
		Entry("through another replica", secondReplica),
	)

	It("answers GET /v1/balance with 404 account_not_found when the account has no PointAccount", func() {
		a := accountWithoutPoints()
		resp := api.get("/v1/balance", a.key)
		Expect(resp.Status).To(Equal(http.StatusNotFound))
		Expect(resp.ErrorCode()).To(Equal("account_not_found"), "the code a task's POST answers for the same account")
		Expect(resp.Message()).To(ContainSubstring("no points account"))
	})
})

// accountWithoutPoints is a namespace with an API key but no PointAccount.
func accountWithoutPoints() account {
	GinkgoHelper()
	ns := envsuite.Unique("nopoints")
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: objectMeta(ns)})).To(Succeed())
	key, _, err := apikeys.Issue(ctx, k8sClient, keyNamespace, ns, "test key")
	Expect(err).NotTo(HaveOccurred())
	// The apiserver learns keys through its informer: 401 until then.
	Eventually(func() int { return api.get("/v1/balance", key).Status }).ShouldNot(Equal(http.StatusUnauthorized))
	return account{ns: ns, key: key}
}

// setSuspended sets the account's spec.suspended, as an administrator does, and waits until
// the ledger has seen it (its Ready condition says so).
func setSuspended(ns string, suspended bool) {
	GinkgoHelper()
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: objectMeta(videogenv1alpha1.PointAccountName)}
	acct.Namespace = ns
	patch := fmt.Appendf(nil, `{"spec":{"suspended":%t}}`, suspended)
	Expect(k8sClient.Patch(ctx, acct, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
	want := videogenv1alpha1.ReasonActive
	if suspended {
		want = videogenv1alpha1.ReasonSuspended
	}
	Eventually(func() string {
		c := meta.FindStatusCondition(suite.AccountOf(ns).Status.Conditions, videogenv1alpha1.ConditionReady)
		if c == nil {
			return ""
		}
		return c.Reason
	}).Should(Equal(want))
}

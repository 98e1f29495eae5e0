package controllers_test

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

// Closing an account revokes its API keys: one an administrator forgot to revoke kept reading
// the namespace's tasks and results, and spent the points of the account made next in it.
var _ = Describe("Closing a PointAccount", func() {
	issue := func(account string) string {
		key, _, err := apikeys.Issue(ctx, k8sClient, webhookSecretNamespace, account, "close test")
		Expect(err).NotTo(HaveOccurred())
		return key
	}
	works := func(key string) func() error {
		auth := &apikeys.Authenticator{Reader: k8sClient, Namespace: webhookSecretNamespace}
		return func() error { _, err := auth.Authenticate(ctx, key); return err }
	}
	accountGone := func(ns string) func() bool {
		return func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: videogenv1alpha1.PointAccountName}, &videogenv1alpha1.PointAccount{}))
		}
	}

	It("revokes the account's keys, and no other account's, and an account made again in the namespace has none", func() {
		stop := startManager(testOptions(testbackend.New()))
		DeferCleanup(stop)
		ns, other := suite.NewAccount(0), suite.NewAccount(0)
		keys := []string{issue(ns), issue(ns)}
		otherKey := issue(other)
		Eventually(func() []string { return suite.AccountOf(ns).Finalizers }).Should(ContainElement(videogenv1alpha1.FinalizerLedger))
		for _, k := range keys {
			Expect(works(k)()).To(Succeed())
		}

		Expect(k8sClient.Delete(ctx, suite.AccountOf(ns))).To(Succeed())
		Eventually(accountGone(ns)).Should(BeTrue())
		for _, k := range keys {
			Expect(works(k)()).To(MatchError(apikeys.ErrInvalidKey), "a key of the closed account")
		}
		Expect(works(otherKey)()).To(Succeed(), "another account's key")
		left, err := apikeys.List(ctx, k8sClient, webhookSecretNamespace, ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(BeEmpty())
		Eventually(func() []string { return eventNotes(ns, videogenv1alpha1.PointAccountName) }).Should(ContainElement(
			"Closed: The account is empty: its books are closed and its API keys revoked"))
		// Each revoked key is named, whichever pass revoked it.
		Eventually(func() string {
			return strings.Join(eventNotes(ns, videogenv1alpha1.PointAccountName), "\n")
		}).Should(SatisfyAll(ContainSubstring("APIKeysRevoked: Revoked the API keys of the account as it closes"),
			ContainSubstring(keyID(keys[0])), ContainSubstring(keyID(keys[1]))))

		// The namespace stays and takes an account again: the old keys stay revoked.
		Expect(k8sClient.Create(ctx, &videogenv1alpha1.PointAccount{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: videogenv1alpha1.PointAccountName},
		})).To(Succeed())
		suite.TopUp(ns, "again", 50)
		suite.ExpectBalanced(ns, 50, 0, 0)
		Expect(works(keys[0])()).To(MatchError(apikeys.ErrInvalidKey))
	})

	It("keeps the account until its keys are revoked, through refused deletes and one that lands but answers an error", func() {
		ns := envsuite.Unique("acct") // known before the manager starts: its hook fails this account's keys only
		var refuse atomic.Bool
		var landedThenFailed atomic.Int64
		refuse.Store(true)
		stop := startManager(testOptions(testbackend.New()), intercepted(interceptor.Funcs{
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				if s, ok := obj.(*corev1.Secret); !ok || s.Labels[apikeys.LabelAccount] != ns {
					return c.Delete(ctx, obj, opts...)
				}
				if refuse.Load() {
					return apierrors.NewServiceUnavailable("the kube-apiserver is overloaded")
				}
				if err := c.Delete(ctx, obj, opts...); err != nil || !landedThenFailed.CompareAndSwap(0, 1) {
					return err
				}
				return apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
			},
		}))
		DeferCleanup(stop)
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(k8sClient.Create(ctx, &videogenv1alpha1.PointAccount{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: videogenv1alpha1.PointAccountName},
		})).To(Succeed())
		keys := []string{issue(ns), issue(ns), issue(ns)}
		Eventually(func() []string { return suite.AccountOf(ns).Finalizers }).Should(ContainElement(videogenv1alpha1.FinalizerLedger))

		Expect(k8sClient.Delete(ctx, suite.AccountOf(ns))).To(Succeed())
		// Empty, but its keys cannot be revoked yet: it stays, closing, and they still work.
		Consistently(accountGone(ns), 2*time.Second).Should(BeFalse())
		for _, k := range keys {
			Expect(works(k)()).To(Succeed())
		}

		refuse.Store(false)
		Eventually(accountGone(ns)).Should(BeTrue())
		Expect(landedThenFailed.Load()).To(Equal(int64(1)), "a delete landed and answered an error")
		for _, k := range keys {
			Expect(works(k)()).To(MatchError(apikeys.ErrInvalidKey))
		}
	})
})

// keyID is the id of key, as events and apikey list name it.
func keyID(key string) string {
	id, ok := apikeys.IDOf(key)
	Expect(ok).To(BeTrue(), "a key")
	return id
}

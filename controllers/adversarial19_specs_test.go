package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

// Adversarial round 19: objects made with kubectl whose spec passes the schema but is odd.
var _ = Describe("Adversarial: specs made with kubectl (round 19)", func() {
	// What breaks: a PointTopUp's reference is unique in its namespace for good, so that one
	// invoice is never credited twice, and the schema refuses a space at either end since
	// "INV-1 " was credited beside an applied "INV-1" (commit 8689eeb: the printer column shows
	// both the same). The pattern ^\S(.*\S)?$ is RE2's, whose \S is ASCII only: a no-break
	// space (what a spreadsheet or a PDF puts after an invoice number copied from it), an
	// ideographic or em space, a zero-width space or a byte-order mark at either end still
	// passes, and the ledger, which compares references byte for byte, credits the invoice a
	// second time. `kubectl get ptu` and videogenctl's output show the two references the same.
	//
	// Steps: 1. an administrator applies INV-<n> for 100 points (credited). 2. The same invoice
	// is applied again, its number pasted with an invisible character at one end (kubectl
	// apply, or videogenctl topup --reference, which passes the flag as is). Both steps are an
	// administrator's ordinary kubectl use; nothing races.
	DescribeTable("does not credit an applied reference again when it comes back with an invisible character at one end",
		func(pad func(string) string) {
			stop := startManager(testOptions(testbackend.New()))
			DeferCleanup(stop)
			ns := suite.NewAccount(0)
			first := suite.TopUp(ns, envsuite.Unique("inv"), 100)
			Eventually(appliedReason(first)).Should(Equal(videogenv1alpha1.ReasonCredited))

			again := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: envsuite.Unique("again")},
				Spec: videogenv1alpha1.PointTopUpSpec{Amount: 100, Reference: pad(first.Spec.Reference)}}
			if err := k8sClient.Create(ctx, again); err != nil {
				// Refused at the door: nothing was created, nothing can be credited.
				Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
				Expect(err.Error()).To(ContainSubstring("spec.reference"))
			} else {
				Eventually(appliedReason(again)).ShouldNot(BeEmpty())
				Expect(appliedReason(again)()).To(Equal(videogenv1alpha1.ReasonDuplicateReference),
					"reference %q was credited beside %q", again.Spec.Reference, first.Spec.Reference)
			}
			Consistently(func() int64 { return suite.AccountOf(ns).Status.Credited }, 500*time.Millisecond).Should(Equal(int64(100)))
		},
		Entry("a no-break space at the end", func(r string) string { return r + "\u00a0" }),
		Entry("an ideographic space at the start", func(r string) string { return "\u3000" + r }),
		Entry("an em space at the end", func(r string) string { return r + "\u2003" }),
		Entry("a zero-width space at the end", func(r string) string { return r + "\u200b" }),
		Entry("a byte-order mark at the start", func(r string) string { return "\ufeff" + r }),
		Entry("a line separator at the end", func(r string) string { return r + "\u2028" }),
	)

	It("still takes references of any script, with spaces inside", func() {
		for _, ref := range []string{"A", "INV 2026/001", "Rechnung Nr. 7 (Ä)", "請求書-1", "INV\u00a01"} {
			t := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: envsuite.Unique("ref")},
				Spec: videogenv1alpha1.PointTopUpSpec{Amount: 1, Reference: ref}}
			Expect(k8sClient.Create(ctx, t, client.DryRunAll)).To(Succeed(), "reference %q", ref)
		}
	})
})

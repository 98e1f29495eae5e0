package controllers_test

import (
	"strings"
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

// Objects made with kubectl whose spec passes the schema but is odd.
var _ = Describe("Specs made with kubectl", func() {
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

var _ = Describe("A kubectl task's webhookURL", func() {
	// What breaks: the REST API takes a webhook_url only if netguard.CheckURL does (it parses,
	// its port is 1-65535, it carries no credentials). A VideoTask made with kubectl is held
	// only to the schema's ^https?:// and 2048 characters, and the webhook controller sends to
	// whatever it says. A URL that can never be parsed (a stray "%" in its query, a space in
	// its host, a port that is no number) is tried on the whole schedule (eight attempts over
	// some 28 hours by default), a Warning event each, the task kept open all that time, and
	// last_error blames the receiver while quoting the URL whole: "receiver parse
	// \"https://ci:s3cret@hooks.example/...\": invalid URL escape" — in GET /v1/tasks/{id}
	// and in the namespace's events, credentials included. A parseable URL with credentials,
	// which the REST API refuses, is posted to with them as Basic auth.
	//
	// Steps: a task made with kubectl whose webhookURL is such a URL runs and succeeds (the
	// test backend): nothing races.
	DescribeTable("stops at once, without quoting the URL, a webhookURL the REST API would refuse as malformed",
		func(url func(receiver string) string, lastError string) {
			backend := testbackend.New()
			stop := startManager(testOptions(backend))
			DeferCleanup(stop)
			ns := suite.NewAccount(100)
			recv := newTaskReceiver(ns)
			task := taskWithWebhook(ns, url(recv.server.URL), testbackend.Script{}, backend)
			Eventually(func() *videogenv1alpha1.WebhookDelivery { return webhookOf(ns, task.Name) }).Should(And(
				Not(BeNil()), Not(HaveField("State", videogenv1alpha1.WebhookPending))))
			w := webhookOf(ns, task.Name)
			Expect(w.State).To(Equal(videogenv1alpha1.WebhookStopped), "last error %q after %d attempts", w.LastError, w.Attempts)
			Expect(w.Attempts).To(BeNumerically("==", 1))
			Expect(w.LastError).To(Equal(lastError))
			Expect(taskOf(ns, task.Name).Status.Closed).To(BeTrue(), "nothing is left to do for the task")
			Expect(recv.deliveries()).To(BeEmpty())
			Consistently(func() []string { return eventNotes(ns, task.Name) }, 500*time.Millisecond).ShouldNot(
				ContainElement(ContainSubstring("s3cret")))
		},
		Entry("an escape that is none, with credentials", func(string) string { return "https://ci:s3cret@hooks.example/done/%zz" },
			`the webhook URL is not a valid URL: invalid URL escape "%zz"`),
		Entry("a space in the host", func(string) string { return "http://hooks example/done" },
			`the webhook URL is not a valid URL: invalid character " " in host name`),
		Entry("a port that is no number", func(string) string { return "http://hooks.example:http/done" },
			`the webhook URL is not a valid URL: invalid port ":http" after host`),
		Entry("credentials", func(r string) string { return "http://ci:s3cret@" + strings.TrimPrefix(r, "http://") + "/hook" },
			"the webhook URL must not carry credentials"),
	)
})

// Package hostile sends the real local stack (control plane, manager, REST apiserver and
// reference worker as processes, as `make run` starts them) what attackers and careless clients
// send: every field one character over its CRD limit, field names in another case and
// duplicate keys, slow bodies and headers on every listener, every URL field with SSRF host
// forms, Authorization variants, concurrent webhook secret rotations, unauthenticated worker
// calls, oversized headers. Each must get a clear 4xx in the error envelope and change nothing;
// after the suite the books of every account it touched must balance
// (credited = balance + frozen + spent), and the account that only received refused calls
// must hold exactly what it was given, with no task and no template.
package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/httpserver"
	"github.com/videogen-dev/videogen-operator/internal/localstack"
	"github.com/videogen-dev/videogen-operator/internal/stacktest"
)

// Short read deadlines, so that cutting off a slow client takes seconds.
var deadlines = httpserver.Timeouts{ReadHeader: 2 * time.Second, Read: 3 * time.Second}

const credit = 100

var (
	ctx    context.Context
	cancel context.CancelFunc
	stack  *localstack.Stack
	// refused receives only calls that must be refused; the other accounts take some calls.
	refused, accepted, rotating *account
	// slowClient receives only the slow-body submission, which must be refused too: a key of its own,
	// so that the rate limit the other specs use up on refused's key does not answer first.
	slowClient *account
	// paymentEventsBefore counts the stored PaymentEvents before any spec ran.
	paymentEventsBefore int
	// receiver takes the completion webhooks of the tasks the suite has accepted.
	receiver *httptest.Server
	// httpClient follows no redirect: the service never redirects, and a redirect is an answer.
	httpClient = &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
)

func TestHostile(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(time.Minute)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	RunSpecs(t, "Hostile input Suite (local stack)")
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())
	binDir := GinkgoT().TempDir()
	By("building the binaries")
	Expect(stacktest.Build(binDir, "manager", "apiserver", "worker")).To(Succeed())
	By("starting the local stack")
	var err error
	stack, err = stacktest.Start(ctx, localstack.Config{DataDir: GinkgoT().TempDir(), BinDir: binDir,
		Timeouts: deadlines, Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	refused, accepted, rotating = newAccount("hostile-refused"), newAccount("hostile-accepted"), newAccount("hostile-rotating")
	slowClient = newAccount("hostile-slow")
	receiver = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	paymentEventsBefore = countPaymentEvents()
})

var _ = AfterSuite(func() {
	if stack == nil {
		return
	}
	By("checking the books of every account the suite touched")
	for _, a := range []*account{refused, slowClient, accepted, rotating} {
		Eventually(func(g Gomega) {
			st := pointAccount(a.name).Status
			g.Expect(st.Journal).To(BeEmpty(), "%s: nothing left in the journal", a.name)
			g.Expect(st.Credited).To(Equal(st.Balance+st.Frozen+st.Spent), "%s: credited = balance + frozen + spent", a.name)
			g.Expect(st.Credited).To(BeEquivalentTo(credit), a.name)
			g.Expect(st.Frozen).To(BeZero(), "%s: every task settled", a.name)
		}, 2*time.Minute).Should(Succeed())
	}
	By("checking that refused calls created nothing")
	for _, a := range []*account{refused, slowClient} {
		st := pointAccount(a.name).Status
		Expect([]int64{st.Balance, st.Frozen, st.Spent}).To(Equal([]int64{credit, 0, 0}), "%s: points", a.name)
		var tasks videogenv1alpha1.VideoTaskList
		Expect(stack.Client.List(ctx, &tasks, client.InNamespace(a.name))).To(Succeed())
		Expect(tasks.Items).To(BeEmpty(), "%s: tasks", a.name)
		var templates videogenv1alpha1.ShortTemplateList
		Expect(stack.Client.List(ctx, &templates, client.InNamespace(a.name))).To(Succeed())
		Expect(templates.Items).To(BeEmpty(), "%s: short templates", a.name)
	}
	Expect(countPaymentEvents()).To(Equal(paymentEventsBefore+1), "one PaymentEvent: the Adyen item, however it was resent")

	stack.Stop()
	receiver.Close()
	cancel()
})

// account is a namespace with a PointAccount credited with credit points and an API key.
type account struct{ name, key string }

func newAccount(name string) *account {
	GinkgoHelper()
	return newAccountWith(name, videogenv1alpha1.PointAccountSpec{})
}

// newAccountWith makes an account with spec. It returns once the apiserver's cache holds the
// credited account, and so that spec too.
func newAccountWith(name string, spec videogenv1alpha1.PointAccountSpec) *account {
	GinkgoHelper()
	k := stack.Client
	Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	Expect(k.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: videogenv1alpha1.PointAccountName},
		Spec: spec})).To(Succeed())
	Expect(k.Create(ctx, &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "hostile-credit"},
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: credit, Reference: "HOSTILE-1"}})).To(Succeed())
	key, _, err := apikeys.Issue(ctx, k, localstack.SystemNamespace, name, "hostile test key")
	Expect(err).NotTo(HaveOccurred())
	a := &account{name: name, key: key}
	Eventually(func() any { return call("GET", "/v1/balance", a.key, nil).json()["credited"] }).Should(BeEquivalentTo(credit))
	return a
}

func pointAccount(ns string) *videogenv1alpha1.PointAccount {
	GinkgoHelper()
	pa := &videogenv1alpha1.PointAccount{}
	Expect(stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: videogenv1alpha1.PointAccountName}, pa)).To(Succeed())
	return pa
}

func countPaymentEvents() int {
	GinkgoHelper()
	var l videogenv1alpha1.PaymentEventList
	Expect(stack.Client.List(ctx, &l, client.InNamespace(localstack.SystemNamespace))).To(Succeed())
	return len(l.Items)
}

type reply struct{ stacktest.Reply }

func (r reply) json() map[string]any {
	GinkgoHelper()
	var m map[string]any
	Expect(json.Unmarshal(r.Body, &m)).To(Succeed(), "%.1024s", r.Body)
	return m
}

// refusal checks the error envelope and returns the error's code and message.
func (r reply) refusal() (code, message string) {
	GinkgoHelper()
	e, ok := r.json()["error"].(map[string]any)
	Expect(ok).To(BeTrue(), "not in the error envelope: %.1024s", r.Body)
	Expect(e["request_id"]).To(And(HavePrefix("req_"), Equal(r.Header.Get("X-Request-Id"))), "%.1024s", r.Body)
	Expect(len(r.Body)).To(BeNumerically("<", 2048), "an error echoes what it was sent: %.1024s", r.Body)
	return e["code"].(string), e["message"].(string)
}

// call sends a request to the REST API as key; see stacktest.Call. It waits out the per-key
// rate limit (the suite sends hundreds of requests with one key), which is not what it tests.
func call(method, path, key string, body any, headers ...string) reply {
	return callAt(stack.APIURL, method, path, key, body, headers...)
}

func callAt(base, method, path, key string, body any, headers ...string) reply {
	GinkgoHelper()
	for {
		r, err := stacktest.Call(ctx, httpClient, base, method, path, key, body, headers...)
		Expect(err).NotTo(HaveOccurred())
		if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
			return reply{r}
		}
		wait, _ := strconv.Atoi(r.Header.Get("Retry-After"))
		time.Sleep(time.Duration(max(wait, 1)) * time.Second)
	}
}

// parallel runs each function in its own goroutine and waits for all of them.
func parallel(fns ...func()) {
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Go(func() {
			defer GinkgoRecover()
			fn()
		})
	}
	wg.Wait()
}

func describe(method, path string) string { return fmt.Sprintf("%s %s", method, path) }

package controllers_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	reference "github.com/standard-webhooks/standard-webhooks/libraries/go"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/outbound"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

// taskReceiver is a webhook endpoint that verifies every delivery with the Standard Webhooks
// reference library, using the account's secret as the API shows it to the account.
type taskReceiver struct {
	server   *httptest.Server
	account  string
	statuses []int
	mu       sync.Mutex
	got      []taskDelivery
}

type taskDelivery struct {
	id       string
	verified error
	task     map[string]any
}

func newTaskReceiver(account string, statuses ...int) *taskReceiver {
	r := &taskReceiver{account: account, statuses: statuses}
	store := &webhooksecrets.Store{Client: k8sClient, Reader: k8sClient, Namespace: webhookSecretNamespace}
	r.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		secrets, err := store.Ensure(ctx, account)
		Expect(err).NotTo(HaveOccurred())
		wh, err := reference.NewWebhook(secrets.Current)
		Expect(err).NotTo(HaveOccurred())
		d := taskDelivery{id: req.Header.Get("webhook-id"), verified: wh.Verify(body, req.Header)}
		_ = json.Unmarshal(body, &d.task)
		r.mu.Lock()
		r.got = append(r.got, d)
		status := http.StatusOK
		if len(r.statuses) > 0 {
			status = r.statuses[min(len(r.got), len(r.statuses))-1]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	DeferCleanup(r.server.Close)
	return r
}

func (r *taskReceiver) deliveries() []taskDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]taskDelivery(nil), r.got...)
}

// taskWithWebhook creates a task whose completion goes to url.
func taskWithWebhook(ns, url string, s testbackend.Script, backend *testbackend.Backend) *videogenv1alpha1.VideoTask {
	tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
	b := aShortTask(ns, tmpl)
	b.t.Spec.WebhookURL = url
	backend.Set(b.Name(), s)
	return b.Create()
}

func webhookOf(ns, name string) *videogenv1alpha1.WebhookDelivery {
	return taskOf(ns, name).Status.Webhook
}

var _ = Describe("Completion webhooks", func() {
	var (
		backend *testbackend.Backend
		stop    func()
	)
	BeforeEach(func() {
		backend = testbackend.New()
		stop = startManager(testOptions(backend))
	})
	AfterEach(func() { stop() })

	It("posts the finished task once, signed with the account's secret", func() {
		ns := suite.NewAccount(100)
		recv := newTaskReceiver(ns)
		task := taskWithWebhook(ns, recv.server.URL+"/hooks", testbackend.Script{}, backend)

		Eventually(func() int { return len(recv.deliveries()) }).Should(Equal(1))
		d := recv.deliveries()[0]
		Expect(d.verified).NotTo(HaveOccurred(), "the reference library verifies the signature")
		Expect(d.id).To(Equal(controllers.WebhookID(task)))
		Expect(d.task).To(HaveKeyWithValue("id", task.Name))
		Expect(d.task).To(HaveKeyWithValue("status", "succeeded"))
		Expect(d.task).To(HaveKeyWithValue("charge", "Deducted"))
		Expect(d.task).To(HaveKey("result"))
		Expect(d.task).To(HaveKeyWithValue("webhook", BeNil()), "the delivery's own state is not in what it delivers (docs/api.md)")
		// The receiver can have the delivery before the write that records it lands.
		Eventually(func() videogenv1alpha1.WebhookState {
			if w := webhookOf(ns, task.Name); w != nil {
				return w.State
			}
			return ""
		}).Should(Equal(videogenv1alpha1.WebhookDelivered))
		w := webhookOf(ns, task.Name)
		Expect(w.Attempts).To(Equal(int32(1)))
		Expect(w.LastStatus).To(Equal(int32(200)))
		Expect(w.DeliveredAt).NotTo(BeNil())
		Expect(taskOf(ns, task.Name).Status.Closed).To(BeTrue(), "closed in the write that records the delivery")
		Consistently(func() int { return len(recv.deliveries()) }, time.Second).Should(Equal(1))
		Expect(eventReasons(ns, task.Name)).NotTo(ContainElement("WebhookDelivered"),
			"a first-attempt delivery is in the status; an event per task would be one more write")
	})

	It("retries failures with the same webhook-id until the receiver accepts", func() {
		ns := suite.NewAccount(100)
		recv := newTaskReceiver(ns, http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusOK)
		task := taskWithWebhook(ns, recv.server.URL, testbackend.Script{Analyze: testbackend.Fail}, backend)

		Eventually(func() videogenv1alpha1.WebhookState {
			if w := webhookOf(ns, task.Name); w != nil {
				return w.State
			}
			return ""
		}).Should(Equal(videogenv1alpha1.WebhookDelivered))
		got := recv.deliveries()
		Expect(got).To(HaveLen(3))
		for _, d := range got {
			Expect(d.id).To(Equal(controllers.WebhookID(task)))
			Expect(d.verified).NotTo(HaveOccurred())
			Expect(d.task).To(HaveKeyWithValue("status", "failed"))
		}
		Expect(webhookOf(ns, task.Name).Attempts).To(Equal(int32(3)))
		Eventually(func() []string { return eventReasons(ns, task.Name) }).Should(ContainElements("WebhookRetrying", "WebhookDelivered"))
	})

	It("retries an attempt that times out, under the same id, counting the retry's wait from when the attempt ended", func() {
		stop() // this spec's own manager: a 3 s attempt timeout and a retry 3 s after it
		opts := testOptions(backend)
		opts.Webhooks.Client = outbound.NewGuardedClient(netguard.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, 3*time.Second)
		opts.Webhooks.Schedule = []time.Duration{3 * time.Second}
		stop = startManager(opts)

		var (
			mu       sync.Mutex
			ids      []string
			arrivals []time.Time
		)
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			mu.Lock()
			ids = append(ids, req.Header.Get("webhook-id"))
			arrivals = append(arrivals, time.Now())
			first := len(ids) == 1
			mu.Unlock()
			if first {
				select { // past the sender's timeout
				case <-req.Context().Done():
				case <-time.After(5 * time.Second):
				}
			}
			w.WriteHeader(http.StatusOK)
		}))
		DeferCleanup(recv.Close)
		ns := suite.NewAccount(100)
		task := taskWithWebhook(ns, recv.URL, testbackend.Script{}, backend)

		// The first attempt fails 3 s after it reached the receiver, so the retry is due 3 s
		// (±10 %) after that: at least 4 s after the first arrival even on timestamps cut to
		// the second. Counted from the attempt's start it would be due as it failed.
		var retryAt time.Time
		Eventually(func(g Gomega) {
			var note string
			for _, e := range eventsAbout(ns, task.Name) {
				if e.Reason == "WebhookRetrying" {
					note = e.Note
				}
			}
			_, at, found := strings.Cut(note, "retrying at ")
			g.Expect(found).To(BeTrue(), "a WebhookRetrying event")
			var err error
			retryAt, err = time.Parse(time.RFC3339, at)
			g.Expect(err).NotTo(HaveOccurred())
		}).Should(Succeed())
		mu.Lock()
		firstArrival := arrivals[0]
		mu.Unlock()
		Expect(retryAt.Sub(firstArrival)).To(BeNumerically(">=", 4*time.Second),
			"the retry is scheduled from when the timed-out attempt ended (it reached the receiver at %s)", firstArrival.UTC().Format(time.RFC3339Nano))

		Eventually(func(g Gomega) {
			w := webhookOf(ns, task.Name)
			g.Expect(w).NotTo(BeNil())
			g.Expect(w.State).To(Equal(videogenv1alpha1.WebhookPending))
			g.Expect(w.Attempts).To(Equal(int32(1)))
			g.Expect(w.LastStatus).To(BeZero(), "no answer")
			g.Expect(w.LastError).To(Or(ContainSubstring("timeout"), ContainSubstring("deadline")))
			g.Expect(w.LastAttemptAt).NotTo(BeNil())
			g.Expect(w.NextAttemptAt).NotTo(BeNil())
			// 3 s ± 10 % jitter, on timestamps of one-second resolution.
			g.Expect(w.NextAttemptAt.Sub(w.LastAttemptAt.Time)).To(And(BeNumerically(">=", 2*time.Second), BeNumerically("<=", 4*time.Second)))
		}).Should(Succeed())
		Eventually(func() videogenv1alpha1.WebhookState { return webhookOf(ns, task.Name).State }).Should(Equal(videogenv1alpha1.WebhookDelivered))
		w := webhookOf(ns, task.Name)
		Expect(w.Attempts).To(Equal(int32(2)))
		Expect(w.NextAttemptAt).To(BeNil())
		mu.Lock()
		defer mu.Unlock()
		Expect(ids).To(Equal([]string{controllers.WebhookID(task), controllers.WebhookID(task)}))
		Expect(arrivals[1].Sub(arrivals[0])).To(BeNumerically(">=", 4*time.Second), "the retry waited its step after the failure")
	})

	It("says that a redirect is not followed", func() {
		ns := suite.NewAccount(100)
		recv := newTaskReceiver(ns, http.StatusTemporaryRedirect)
		task := taskWithWebhook(ns, recv.server.URL, testbackend.Script{}, backend)
		Eventually(func() string {
			if w := webhookOf(ns, task.Name); w != nil {
				return w.LastError
			}
			return ""
		}).Should(Equal("receiver answered 307 Temporary Redirect (redirects are not followed: point the webhook at the final URL)"))
	})

	It("stops at 410 Gone", func() {
		ns := suite.NewAccount(100)
		recv := newTaskReceiver(ns, http.StatusGone)
		task := taskWithWebhook(ns, recv.server.URL, testbackend.Script{}, backend)
		Eventually(func() videogenv1alpha1.WebhookState {
			if w := webhookOf(ns, task.Name); w != nil {
				return w.State
			}
			return ""
		}).Should(Equal(videogenv1alpha1.WebhookStopped))
		Consistently(func() int { return len(recv.deliveries()) }, time.Second).Should(Equal(1))
		Expect(eventReasons(ns, task.Name)).NotTo(ContainElement("WebhookDelivered"),
			"a first-attempt delivery is in the status; an event per task would be one more write")
	})

	It("gives up when the schedule is exhausted", func() {
		ns := suite.NewAccount(100)
		recv := newTaskReceiver(ns, http.StatusInternalServerError)
		task := taskWithWebhook(ns, recv.server.URL, testbackend.Script{}, backend)
		Eventually(func() videogenv1alpha1.WebhookState {
			if w := webhookOf(ns, task.Name); w != nil {
				return w.State
			}
			return ""
		}).Should(Equal(videogenv1alpha1.WebhookFailed))
		Expect(recv.deliveries()).To(HaveLen(3), "the first attempt and one per schedule entry")
		Expect(webhookOf(ns, task.Name).LastError).To(ContainSubstring("500"))
	})

	It("delivers exactly once per terminal state across a manager restart", func() {
		ns := suite.NewAccount(100)
		recv := newTaskReceiver(ns)
		task := taskWithWebhook(ns, recv.server.URL, testbackend.Script{}, backend)
		Eventually(func() int { return len(recv.deliveries()) }).Should(Equal(1))
		Eventually(func() *videogenv1alpha1.WebhookDelivery { return webhookOf(ns, task.Name) }).ShouldNot(BeNil())
		stop()
		stop = startManager(testOptions(backend))
		Consistently(func() int { return len(recv.deliveries()) }, 2*time.Second).Should(Equal(1))
	})

	It("signs with both secrets during a rotation", func() {
		ns := suite.NewAccount(100)
		store := &webhooksecrets.Store{Client: k8sClient, Reader: k8sClient, Namespace: webhookSecretNamespace}
		old, err := store.Ensure(ctx, ns)
		Expect(err).NotTo(HaveOccurred())
		rotated, err := store.Rotate(ctx, ns, time.Hour)
		Expect(err).NotTo(HaveOccurred())
		Expect(rotated.Previous).To(Equal(old.Current))

		var mu sync.Mutex
		var verifiedOld, verifiedNew error = errNotCalled, errNotCalled
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			body, _ := io.ReadAll(req.Body)
			o, _ := reference.NewWebhook(old.Current)
			n, _ := reference.NewWebhook(rotated.Current)
			mu.Lock()
			verifiedOld, verifiedNew = o.Verify(body, req.Header), n.Verify(body, req.Header)
			mu.Unlock()
		}))
		DeferCleanup(srv.Close)
		taskWithWebhook(ns, srv.URL, testbackend.Script{}, backend)
		Eventually(func() []error { mu.Lock(); defer mu.Unlock(); return []error{verifiedOld, verifiedNew} }).
			Should(Equal([]error{nil, nil}), "a receiver with either secret verifies the delivery")
	})

	It("delivers to several slow receivers at once rather than queueing behind them", func() {
		stop()
		opts := testOptions(backend)
		// Receivers that hold every request until the spec ends: only concurrency lets more
		// than the first few deliveries start.
		opts.Webhooks.Client = outbound.NewGuardedClient(netguard.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, time.Minute)
		stop = startManager(opts)
		release := make(chan struct{})
		var mu sync.Mutex
		inFlight, most := 0, 0
		hold := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			select {
			case <-release:
			case <-req.Context().Done():
			}
			mu.Lock()
			inFlight--
			mu.Unlock()
		})

		// Three accounts, each with its own receiver: a receiver's host, and an account, get a
		// quarter of the workers at most (see videotask_webhook_fairness_internal_test.go).
		for range 3 {
			slow := httptest.NewServer(hold)
			DeferCleanup(slow.Close)
			ns := suite.NewAccount(100)
			for range 2 {
				taskWithWebhook(ns, slow.URL, testbackend.Script{}, backend)
			}
		}
		DeferCleanup(func() { close(release) }) // before the servers close (cleanups run last first)
		Eventually(func() int {
			mu.Lock()
			defer mu.Unlock()
			return most
		}).Should(Equal(6), "all six deliveries in flight together (the controller once had 4 workers)")
	})
})

var _ = Describe("Completion webhooks to private addresses", func() {
	It("are refused at connect time unless allowed", func() {
		backend := testbackend.New()
		opts := testOptions(backend)
		opts.Webhooks.Client = outbound.NewGuardedClient(netguard.Policy{Allow: []netip.Prefix{}}, time.Second)
		stop := startManager(opts)
		defer stop()
		ns := suite.NewAccount(100)
		recv := newTaskReceiver(ns)
		// Through a name that resolves to loopback: caught only at dial time.
		url := "http://localhost:" + recv.server.URL[len("http://127.0.0.1:"):]
		task := taskWithWebhook(ns, url, testbackend.Script{}, backend)
		Eventually(func() string {
			if w := webhookOf(ns, task.Name); w != nil {
				return w.LastError
			}
			return ""
		}).Should(ContainSubstring("not a public address"))
		Expect(recv.deliveries()).To(BeEmpty())
		// A name may be re-pointed: the whole schedule is tried.
		Eventually(func() *videogenv1alpha1.WebhookDelivery { return webhookOf(ns, task.Name) }).Should(And(
			HaveField("State", videogenv1alpha1.WebhookFailed), HaveField("Attempts", BeNumerically("==", 3))))
	})

	It("stop at once when the URL's host is a private literal address", func() {
		backend := testbackend.New()
		opts := testOptions(backend)
		opts.Webhooks.Client = outbound.NewGuardedClient(netguard.Policy{}, time.Second)
		stop := startManager(opts)
		defer stop()
		ns := suite.NewAccount(100)
		recv := newTaskReceiver(ns)
		// A task made with kubectl: the REST API would have refused this URL.
		task := taskWithWebhook(ns, recv.server.URL+"/hook", testbackend.Script{}, backend)
		Eventually(func() *videogenv1alpha1.WebhookDelivery { return webhookOf(ns, task.Name) }).Should(And(
			Not(BeNil()), HaveField("State", videogenv1alpha1.WebhookStopped)))
		Expect(taskOf(ns, task.Name).Status.Closed).To(BeTrue(), "nothing is left to do for the task")
		w := webhookOf(ns, task.Name)
		Expect(w.Attempts).To(BeNumerically("==", 1))
		Expect(w.NextAttemptAt).To(BeNil())
		Expect(w.LastError).To(Equal("receiver: destination is not a public address: 127.0.0.1"))
		Eventually(func() []string { return eventNotes(ns, task.Name) }).Should(ContainElement(
			"WebhookRefused: The webhook URL's host 127.0.0.1 is not a public address; the service never calls one, so no more attempts"))
		Consistently(func() int32 { return webhookOf(ns, task.Name).Attempts }, time.Second).Should(BeNumerically("==", 1))
		Expect(recv.deliveries()).To(BeEmpty())
	})
})

var _ = Describe("A completion webhook's last_error", func() {
	It("says the receiver's host did not resolve, without our resolver's address", func() {
		backend := testbackend.New()
		opts := testOptions(backend)
		opts.Webhooks.Client = outbound.NewGuardedClient(netguard.Policy{}, time.Second)
		stop := startManager(opts)
		defer stop()
		ns := suite.NewAccount(100)
		task := taskWithWebhook(ns, "http://no-such-host.invalid/hook", testbackend.Script{}, backend)
		var lastError string
		Eventually(func() string {
			if w := webhookOf(ns, task.Name); w != nil {
				lastError = w.LastError
			}
			return lastError
		}).Should(ContainSubstring("could not resolve host no-such-host.invalid"))
		// last_error is in the task object its caller reads.
		Expect(lastError).NotTo(MatchRegexp(`\d+\.\d+\.\d+\.\d+:\d+| on `), "no address of our network")
	})
})

var errNotCalled = io.ErrNoProgress

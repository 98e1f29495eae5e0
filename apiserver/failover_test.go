package apiserver_test

// What a REST client sees while the
// manager, which serves the points ledger, fails over.

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

// crashAfterCreate stands for the elected manager as a replica reaches it: it passes every
// call on to the suite's ledger, and the first task create too, but once that create has
// landed (the ledger answered 201, the task exists and holds its price) the manager dies
// before its answer leaves: the connection is closed without a response, and from then on
// nothing listens (connection refused) until a new manager is elected, which here takes longer
// than the replica's ledger call deadline.
func crashAfterCreate() (url string, created *atomic.Pointer[string]) {
	created = &atomic.Pointer[string]{}
	var crashed atomic.Bool
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		Expect(err).NotTo(HaveOccurred())
		req, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, ledgerURL+r.URL.Path, bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		if r.Method == http.MethodPost && resp.StatusCode == http.StatusCreated && crashed.CompareAndSwap(false, true) {
			s := string(out)
			created.Store(&s)
			// The process dies: its connections close unanswered, its port stops listening.
			conn, _, err := w.(http.Hijacker).Hijack()
			Expect(err).NotTo(HaveOccurred())
			_ = srv.Listener.Close()
			_ = conn.Close()
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(out)
	}))
	DeferCleanup(srv.Close)
	return srv.URL, created
}

// crashedLedgerClient is the replica's ledger client as cmd/apiserver makes it, for a manager
// at url that dies after its create landed: the call ends when its attempts are spent (about
// 2 s of connections refused after the crash), as with the default 15 s deadline, which is
// shorter than a failover after a crash (the Lease of the dead manager must expire first, 15 s
// by default, and the new one builds its books), but without waiting 15 s. No deadline this
// short: it would cut the create short on a loaded machine (a kube-apiserver create may take
// seconds), before it landed and the manager died.
func crashedLedgerClient(url string) *ledger.Client {
	return &ledger.Client{URL: url, Deadline: time.Minute,
		Backoff: wait.Backoff{Duration: 50 * time.Millisecond, Factor: 1.5, Steps: 10, Cap: 300 * time.Millisecond}}
}

var _ = Describe("A manager that dies after the create landed", func() {
	var (
		a    account
		tmpl string
		srv  *apiClient
	)
	BeforeEach(func() {
		a = newAccount(100)
		tmpl = template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil)
		backend.Stall(tmpl) // the tasks stay queued, their price frozen: the books are plain to read
		url, _ := crashAfterCreate()
		srv = startAPIServerWith(rate.Inf, 1, nil, nil, crashedLedgerClient(url))
	})

	// What breaks: the ledger client folds "an attempt reached a manager and got no answer" (the
	// create may have landed) into ErrNotReady when the LAST attempt of the call found no manager
	// listening. The apiserver reads ErrNotReady as "nothing was created": it answers 503 "the
	// service is electing its points ledger" (docs/api.md: "task-creating POSTs ... answer 503
	// ... and nothing is created"), and, for a request without an Idempotency-Key, faceUnused
	// says the stored face is nobody's and removes it. But the task exists and holds its price.
	//
	// Interleaving:
	//  1. POST /v1/videos/short with an inline base64 face, no Idempotency-Key. The replica
	//     asks the ledger for the balance (200, enough), stores the face, and sends the create.
	//  2. The elected manager admits it and creates the VideoTask (it carries the face's URL,
	//     its price is frozen), then dies before its 201 is written: the replica reads EOF
	//     (unreachableError, retriable, not a timeout).
	//  3. The client's retries find no manager listening (connection refused) until the call's
	//     deadline: the Lease of the dead manager has not expired yet.
	//  4. Client.call returns ErrNotReady ("no manager listened"); submit → faceUnused(keyed =
	//     false, ErrNotReady) = true → the face is deleted; the answer is 503 service_unavailable.
	//
	// Reachable: step 2 is a manager crash (OOM kill, node loss) between the kube-apiserver's
	// answer to the create and the HTTP write of the 201: a window of the create's whole round
	// trip back plus the JSON encode. Step 3 is the normal Lease failover: 15 s lease duration
	// plus the new manager's books build, longer than DefaultDeadline (15 s in all, retries
	// included). Requests without an Idempotency-Key are allowed (the key is optional).
	//
	// What the user sees: 503 "electing its points ledger", so nothing created; the account
	// shows 30 frozen for a task whose id the client never learns, whose face is gone (the task
	// will fail "the face image you uploaded could not be read back"). A client that retries as
	// told (it has no key to retry with) makes a second task and a second freeze.
	It("does not remove the face of a task it created, nor say nothing was created", func() {
		resp := srv.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": facePNG()})
		GinkgoWriter.Printf("answer: %d %s\n", resp.Status, resp.Body)

		tasks := tasksIn(a.ns)
		Expect(tasks).To(HaveLen(1), "the create landed before the manager died")
		face := blobstore.NameIn(tasks[0].Spec.Inputs.FaceImageURL)
		Expect(face).NotTo(BeEmpty())
		Expect(api.get("/v1/balance", a.key).JSON()).To(HaveKeyWithValue("frozen", BeNumerically("==", 30)))

		Expect(storedBlobs(srv)).To(ContainElement(face),
			"the face of task %s, created with its price frozen, was removed while the client was answered %d", tasks[0].Name, resp.Status)
		if resp.Status == http.StatusServiceUnavailable {
			Expect(resp.Message()).NotTo(ContainSubstring("electing"),
				"503 'electing its points ledger' says nothing was created (docs/api.md), but task %s exists with 30 frozen", tasks[0].Name)
		}
	})

	// Checked, holds (a pin): the same crash with an Idempotency-Key. faceUnused keeps the face
	// of a keyed request on ErrNotReady, and the retry with the key (through a replica whose
	// ledger answers) finds the task that landed: 200 replay, one task, one freeze, and the
	// face the task refers to is still stored.
	It("with an Idempotency-Key, keeps the face and replays the task that landed", func() {
		body := map[string]any{"template_id": tmpl, "face": facePNG()}
		resp := srv.post("/v1/videos/short", a.key, body, "Idempotency-Key", "crash-keyed")
		Expect(resp.Status).To(Equal(http.StatusServiceUnavailable), string(resp.Body))
		tasks := tasksIn(a.ns)
		Expect(tasks).To(HaveLen(1))
		Expect(storedBlobs(srv)).To(ContainElement(blobstore.NameIn(tasks[0].Spec.Inputs.FaceImageURL)))
		for _, r := range []*apiClient{srv, api} {
			retry := r.post("/v1/videos/short", a.key, body, "Idempotency-Key", "crash-keyed")
			Expect(retry.Status).To(Equal(http.StatusOK), string(retry.Body))
			Expect(retry.Header.Get("Idempotent-Replayed")).To(Equal("true"))
			Expect(retry.JSON()["id"]).To(Equal(tasks[0].Name))
		}
		Expect(tasksIn(a.ns)).To(HaveLen(1))
		Expect(api.get("/v1/balance", a.key).JSON()).To(HaveKeyWithValue("frozen", BeNumerically("==", 30)))
	})

	// The same crash without a face: the client, told 503 "electing" (nothing created), retries
	// the same request without a key (it has none) once the ledger is back, and pays twice for
	// one intent. Reachable as above; the retry goes to the suite's replica (a live manager).
	It("does not let a client's single intent freeze twice because the 503 said nothing was created", func() {
		body := map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/face.jpg"}
		resp := srv.post("/v1/videos/short", a.key, body)
		GinkgoWriter.Printf("answer: %d %s\n", resp.Status, resp.Body)
		Expect(tasksIn(a.ns)).To(HaveLen(1), "the create landed before the manager died")
		if resp.Status == http.StatusServiceUnavailable && resp.ErrorCode() == "service_unavailable" &&
			strings.Contains(resp.Message(), "electing") {
			// The client does what the answer says: nothing was created, retry.
			retry := api.post("/v1/videos/short", a.key, body)
			Expect(retry.Status).To(Equal(http.StatusAccepted), string(retry.Body))
		}
		Expect(tasksIn(a.ns)).To(HaveLen(1), "one client intent, answered 503 'electing its points ledger' (nothing created), made two tasks")
		Expect(api.get("/v1/balance", a.key).JSON()).To(HaveKeyWithValue("frozen", BeNumerically("==", 30)))
	})
})

// notReadyFor stands for the way to the ledger during a failover: for d after its first call
// every call is answered 503 not_ready (as a manager answers while it is not the elected one
// or is still building its books, or as a Service with no ready endpoint does), then calls go
// to the suite's ledger.
func notReadyFor(d time.Duration) string {
	var since atomic.Pointer[time.Time]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		since.CompareAndSwap(nil, &now)
		if time.Since(*since.Load()) < d {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"not_ready","message":"not the elected manager"}}`))
			return
		}
		body, err := io.ReadAll(r.Body)
		Expect(err).NotTo(HaveOccurred())
		req, err := http.NewRequestWithContext(r.Context(), r.Method, ledgerURL+r.URL.Path, bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(out)
	}))
	DeferCleanup(srv.Close)
	return srv.URL
}

var _ = Describe("A failover shorter than the ledger call's deadline", func() {
	// What breaks: ledger.Client documents that it "retries while no manager answers as the
	// elected one ... for up to Deadline (15 s) in all", DefaultBackoff that it "retries for
	// about 15 s", and docs/api.md that "the apiserver waits for the ledger at most about 15 s
	// per request, retries included". But DefaultBackoff (100 ms × 1.5, Cap 2 s, Steps 14)
	// stops at its cap: wait.Backoff.Step sets Steps to 0 once the delay reaches Cap, so
	// ExponentialBackoffWithContext makes 9 attempts over about 4.9 s and gives up. A failover
	// of 5 to 15 s is answered 503 instead of being waited out.
	//
	// Interleaving: the manager fails over (the old one released its Lease on a rolling update;
	// the new one answers not_ready while it builds its books from the kube-apiserver, for 8 s
	// here); a client POSTs a task through a replica with cmd/apiserver's ledger client (the
	// defaults). Reachable: a graceful failover plus a books build of seconds (a large tenant
	// base to list) or a crash failover (the Lease must expire, 15 s) are the events the
	// deadline exists for.
	//
	// What the user sees: 503 "the service is electing its points ledger" after about 5 s, for a
	// failover the service says it rides out; every client retries (and, with no
	// Idempotency-Key, after the 503 of the scenario above, may pay twice).
	It("waits out a failover of 8 s within the documented 15 s", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil)
		srv := startAPIServerWith(rate.Inf, 1, nil, nil, &ledger.Client{URL: notReadyFor(8 * time.Second)})
		start := time.Now()
		resp := srv.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/face.jpg"},
			"Idempotency-Key", "failover-8s")
		Expect(resp.Status).To(Equal(http.StatusAccepted),
			"answered after %v, within the documented 15 s deadline, for a failover of 8 s: %s", time.Since(start).Round(100*time.Millisecond), resp.Body)
	})
})

var _ = Describe("A retry with an inline face while its task is being created", func() {
	// What breaks: for a request with an inline face, submit asks the ledger for the balance and
	// answers 402 when it is short, BEFORE the ledger is asked to create the task. The ledger's
	// CreateTask checks "a task of this name is open" (ErrTaskExists → 409 or replay) before
	// the balance; the face pre-check does not. The balance it reads already has the key's own
	// task counted (admitted, being created), so on an account that affords exactly that task a
	// retry of the same request with the same Idempotency-Key is told 402 insufficient_balance
	// instead of 409 idempotency_key_in_use (docs/api.md: "While the first is being created, a
	// second one with its key (through any replica) answers 409 ... retry then, and it replays
	// the task").
	//
	// Interleaving:
	//  1. POST /v1/videos/short, Idempotency-Key K, inline face, on an account with 30 points
	//     and a 30-point template. The ledger admits it (30 counted) and sends the create.
	//  2. Before that create lands (held here), the client retries the same request with K (its
	//     first connection broke, or its own timeout fired), through either replica.
	//  3. The retry misses both replay checks (the cache and the kube-apiserver have no task
	//     yet), and the face pre-check reads balance 0 < 30: 402.
	//  4. The create lands; the first request's 202 may never reach the client.
	//
	// Reachable: a create takes milliseconds to seconds (a loaded kube-apiserver); a client
	// retrying on its own timeout, or a double submit, lands in it. Exactly-affordable accounts
	// are common (prepaid credit spent to the last task).
	//
	// What the user sees: 402 "insufficient balance ... ask your administrator for a top-up" for
	// a request that was admitted and is running, paid for. A client treating 402 as final never
	// learns the task's id (it does not retry); one that tops up and retries gets the replay.
	DescribeTable("answers 409 (or the replay), not 402, to a retry of an admitted task",
		func(server func() *apiClient) {
			a := newAccount(30)
			tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil)
			backend.Stall(tmpl)
			body := map[string]any{"template_id": tmpl, "face": facePNG()}
			release := holdCreate(apiserver.TaskName(a.ns, "paid-once"))
			defer release()
			first := make(chan response, 1)
			go func() {
				defer GinkgoRecover()
				first <- api.post("/v1/videos/short", a.key, body, "Idempotency-Key", "paid-once")
			}()
			// The ledger has admitted the first (it is being created).
			Eventually(func() any { return api.get("/v1/balance", a.key).JSON()["frozen"] }).Should(BeNumerically("==", 30))

			retry := server().post("/v1/videos/short", a.key, body, "Idempotency-Key", "paid-once")
			release()
			var got response
			Eventually(first).Should(Receive(&got))
			Expect(got.Status).To(Equal(http.StatusAccepted), string(got.Body))
			Expect(tasksIn(a.ns)).To(HaveLen(1))
			Expect(retry.Status).To(BeElementOf(http.StatusConflict, http.StatusOK),
				"the retry of task %s, admitted and paid (30 of 30 frozen), was answered: %s", got.JSON()["id"], retry.Body)
		},
		Entry("through the same replica", firstReplica),
		Entry("through another replica", secondReplica),
	)
})

// slowCreate is the replica's way to the ledger while the kube-apiserver is slow: the ledger's
// create of the task (after its admission) waits until the replica's call has returned.
type slowCreate struct{ *ledger.Client }

func (s slowCreate) CreateTask(ctx context.Context, t *videogenv1alpha1.VideoTask, price int64) (*videogenv1alpha1.VideoTask, error) {
	release := holdCreate(t.Name)
	defer release()
	return s.Client.CreateTask(ctx, t, price)
}

var _ = Describe("A request without an Idempotency-Key whose ledger call is retried", func() {
	// What breaks: ledger.Client retries a create whose attempt got no answer in time (its
	// per-attempt HTTP timeout, 10 s by default). The ledger still holds the first attempt's
	// admission (its create at the kube-apiserver is under way), so the retry is refused
	// task_exists; the apiserver reads that as "a request with this Idempotency-Key won a race",
	// finds no task yet around its cache, and answers 409 idempotency_key_in_use, "a request
	// with this Idempotency-Key is still being processed", to a request that sent no key.
	//
	// Interleaving:
	//  1. POST /v1/videos/short without Idempotency-Key (the name is random, vt-…).
	//  2. The ledger admits it and sends the create; the kube-apiserver is slow to answer (held
	//     here) past the replica's per-attempt timeout (300 ms here, 10 s in cmd/apiserver).
	//  3. The client retries the same create (same random name): the ledger finds the entry of
	//     step 2 and answers 409 task_exists; the replica finds no task: 409 key_in_use.
	//  4. The first create ends. Here it fails (its context was cancelled with the connection);
	//     against a real kube-apiserver a create whose request was sent may commit all the same
	//     (the ledger's own CreateTask says so: "the create may have landed").
	//
	// Reachable: a kube-apiserver or etcd slow for over 10 s (compaction, a leader election of
	// etcd) while the manager is the elected one; requests without a key are allowed.
	//
	// What the user sees: a 409 about an Idempotency-Key they never sent, with "retry shortly";
	// if the create landed, a task they cannot find (no key, no id) and, on retry, a second
	// task and a second freeze. The answer should be the 503 "did not answer in time" (the
	// create may have landed), or the task itself (its name is the request's own).
	It("does not answer idempotency_key_in_use to a request that sent no key", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil)
		backend.Stall(tmpl)
		srv := startAPIServerWith(rate.Inf, 1, nil, nil, slowCreate{&ledger.Client{URL: ledgerURL,
			HTTP: &http.Client{Timeout: 300 * time.Millisecond}}})
		resp := srv.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/face.jpg"})
		GinkgoWriter.Printf("answer: %d %s\n", resp.Status, resp.Body)
		if resp.Status == http.StatusAccepted {
			// The first create landed before the retry's answer: since the retry finds its own
			// task around the cache (its name is the request's own, the request hash checked),
			// it is answered with that task, the better of the two answers above. One task.
			Expect(tasksIn(a.ns)).To(HaveLen(1))
			Expect(resp.JSON()["id"]).To(Equal(tasksIn(a.ns)[0].Name))
			return
		}
		Expect(resp.Status).To(BeNumerically(">=", 400))
		Expect(resp.ErrorCode()).NotTo(Equal("idempotency_key_in_use"),
			"a request without an Idempotency-Key was answered: %s", resp.Body)
	})
})

var _ = Describe("A keyed request whose ledger call is retried", func() {
	// The keyed form of the spec above, seen in a control-plane outage (etcd frozen 40 s): the
	// ledger call's first attempt gets no answer within its timeout while the manager's create
	// waits on the kube-apiserver; the retry is answered task_exists (that very create, still
	// on its way) and no task is found around the cache. The apiserver answered 409
	// idempotency_key_in_use, "a request with this Idempotency-Key is still being processed",
	// to the only request that ever sent the key. The answer is the 503 "did not answer in
	// time" (the create may land: retry with the same key), and the retry replays the task.
	It("answers 503, not idempotency_key_in_use, and the retry with the key replays the task", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil)
		backend.Stall(tmpl)
		release := holdCreate(apiserver.TaskName(a.ns, "outage"))
		defer release()
		srv := startAPIServerWith(rate.Inf, 1, nil, nil, &ledger.Client{URL: ledgerURL,
			HTTP: &http.Client{Timeout: 300 * time.Millisecond}})
		body := map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/face.jpg"}
		resp := srv.post("/v1/videos/short", a.key, body, "Idempotency-Key", "outage")
		Expect(resp.Status).To(Equal(http.StatusServiceUnavailable), string(resp.Body))
		Expect(resp.ErrorCode()).To(Equal("service_unavailable"))
		Expect(resp.Message()).To(ContainSubstring("with the same Idempotency-Key"))
		Expect(resp.Header.Get("Retry-After")).NotTo(BeEmpty())

		release() // the kube-apiserver answers: the held create lands
		Eventually(func() int { return srv.post("/v1/videos/short", a.key, body, "Idempotency-Key", "outage").Status }).
			Should(Equal(http.StatusOK), "the retry replays the task the first request made")
		Expect(tasksIn(a.ns)).To(HaveLen(1))
		Expect(api.get("/v1/balance", a.key).JSON()).To(HaveKeyWithValue("frozen", BeNumerically("==", 30)))
	})
})

var _ = Describe("A create the kube-apiserver refuses", func() {
	// What breaks: the ledger turns a create the kube-apiserver refuses for a reason of the
	// namespace's (403 Forbidden: a ResourceQuota on VideoTasks is exhausted, or an admission
	// webhook or policy says no) into a 500 internal_error of its own (writeLedgerError knows
	// Invalid and BadRequest only); the ledger client passes "the ledger answered 500" on, and
	// submit's admissionRefused answers 500 internal_error. Nothing was created and nothing is
	// frozen, but the client sees the service's fault, with no hint that retrying cannot help.
	//
	// Interleaving: an administrator caps the tenant's namespace with a ResourceQuota
	// count/videotasks.videogen.dev (kubectl, within a cluster admin's RBAC; the quota
	// controller has filled in its used count, done by hand here since envtest runs no
	// controller-manager); the tenant POSTs a task over the cap.
	//
	// What the user sees: 500 internal_error ("details only in the logs") for a refusal that is
	// the account's, as 402 and 403 account_* are; docs/api.md lists 500 as the service's fault.
	It("answers a 4xx in the error envelope, not 500, when a quota refuses the task", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil)
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "tasks", Namespace: a.ns},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/videotasks.videogen.dev": resource.MustParse("0")}}}
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{"count/videotasks.videogen.dev": resource.MustParse("0")}}
		Expect(k8sClient.Status().Update(ctx, q)).To(Succeed())
		// The quota admission reads quotas through its own informer: wait until it refuses.
		Eventually(func() error {
			t := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: a.ns},
				Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
					Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}
			return k8sClient.Create(ctx, t, client.DryRunAll)
		}).Should(MatchError(ContainSubstring("exceeded quota")))

		resp := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/face.jpg"},
			"Idempotency-Key", "over-quota")
		GinkgoWriter.Printf("answer: %d %s\n", resp.Status, resp.Body)
		Expect(tasksIn(a.ns)).To(BeEmpty())
		Expect(api.get("/v1/balance", a.key).JSON()).To(HaveKeyWithValue("frozen", BeNumerically("==", 0)), "the refused create holds nothing")
		Expect(resp.Status).To(And(BeNumerically(">=", 400), BeNumerically("<", 500)), "answered: %s", resp.Body)
		Expect(resp.ErrorCode()).NotTo(BeEmpty())
	})
})

// listHook is a replica's blob store whose List runs afterList once it has listed every blob.
type listHook struct {
	*blobstore.Dir
	afterList func()
}

func (h *listHook) List(ctx context.Context, fn func(name string, put time.Time) error) error {
	if err := h.Dir.List(ctx, fn); err != nil {
		return err
	}
	if h.afterList != nil {
		h.afterList()
	}
	return nil
}

// startReplicaWithBlobs is startAPIServer with the replica's blob store in hand.
func startReplicaWithBlobs() (*apiClient, *listHook) {
	mgr := newManager(cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{keyNamespace: {}},
			Label:      labels.SelectorFromSet(labels.Set{apikeys.LabelAPIKey: "true"}),
		},
	}})
	c := mgr.GetClient()
	dir := &blobstore.Dir{Root: GinkgoT().TempDir()}
	blobs := &listHook{Dir: dir}
	srv := apiserver.New(apiserver.Config{
		Client: c, APIReader: mgr.GetAPIReader(), Ledger: &ledger.Client{URL: ledgerURL},
		Keys:  &apikeys.Authenticator{Reader: mgr.GetClient(), Namespace: keyNamespace},
		Blobs: blobs, DefaultPrice: 10, RateLimit: rate.Inf, RateBurst: 1,
		WebhookSecrets: &webhooksecrets.Store{Client: c, Reader: mgr.GetAPIReader(), Namespace: keyNamespace},
		Logger:         slog.New(slog.NewTextHandler(GinkgoWriter, nil)),
	})
	srv.Mux().Handle("GET /v1/blobs/", dir.Handler("/v1/blobs/"))
	start(mgr)
	hs := httptest.NewServer(srv.Handler())
	DeferCleanup(hs.Close)
	dir.BaseURL = hs.URL + "/v1/blobs/"
	return &apiClient{base: hs.URL, http: hs.Client(), blobDir: dir.Root, srv: srv}, blobs
}

var _ = Describe("The face sweep and a retry that stores the same face again", func() {
	// What breaks: SweepFaces lists the blobs first (keeping those last put over an hour ago),
	// then the tasks, then deletes the listed faces no listed task uses. Its comment: "a face
	// stored after the listing is no candidate". But a keyed retry with the same face stores
	// the SAME name (blobstore.ContentName of the task name and the bytes): a face kept from an
	// earlier attempt (docs/api.md: "With an Idempotency-Key, a 402, 403 or 503 keeps it:
	// another request with the key and the same face stores the same object and may still be
	// admitted (after a top-up, a refund or a failover)") is a candidate by its OLD time even
	// though the retry has just put it again; if the retry's task is not in the sweeper's
	// cache when it lists the tasks (the create has not landed yet), the face is deleted, and
	// the task created a moment later refers to a face that is gone.
	//
	// Interleaving:
	//  1. T0: POST with Idempotency-Key K and an inline face; the face is stored, the ledger
	//     refuses (403 account_suspended, or 402 after a race, or 503): the face is kept.
	//  2. T0 + 1 h or more: the account is resumed / topped up. A replica's sweep lists its
	//     blobs: the face, put at T0, is a candidate.
	//  3. The client retries with K and the same face: Put refreshes the same object, the
	//     ledger admits the task and sends the create.
	//  4. The sweep lists the tasks (the create has not landed, or its cache has not seen it):
	//     no task uses the face; it deletes it.
	//  5. The create lands: a task with its price frozen whose face is gone.
	//
	// Reachable: step 1 is a documented outcome; an hour is how long an administrator's
	// top-up or resume may take; step 2 runs every 10 min on every replica, and listing an S3
	// bucket of many faces takes seconds, during which step 3 may come; step 4 follows
	// step 3 by the ledger's round trip (milliseconds) or the cache's lag.
	//
	// What the user sees: 202 for the retry, then the task fails ("the face image you
	// uploaded could not be read back from the service's storage") and is refunded: the
	// client did everything as told and got a failed task.
	It("does not delete a face a retry has just stored again for the task it is creating", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil)
		backend.Stall(tmpl)
		srv, blobs := startReplicaWithBlobs()
		Eventually(func() int { return srv.get("/v1/balance", a.key).Status }).Should(Equal(http.StatusOK))

		body := map[string]any{"template_id": tmpl, "face": facePNG()}
		name := apiserver.TaskName(a.ns, "after-resume")
		data, err := base64.StdEncoding.DecodeString(body["face"].(string))
		Expect(err).NotTo(HaveOccurred())
		// Step 1, an hour and more ago: the first attempt's face, kept after its refusal.
		face := blobstore.ContentName(name, "image/png", data)
		_, err = blobs.Put(ctx, face, "image/png", data)
		Expect(err).NotTo(HaveOccurred())
		hoursAgo := time.Now().Add(-2 * time.Hour)
		Expect(os.Chtimes(filepath.Join(srv.blobDir, face), hoursAgo, hoursAgo)).To(Succeed())

		release := holdCreate(name)
		defer release()
		retried := make(chan response, 1)
		blobs.afterList = func() {
			blobs.afterList = nil
			// Step 3, while the sweep is between its two listings.
			go func() {
				defer GinkgoRecover()
				retried <- srv.post("/v1/videos/short", a.key, body, "Idempotency-Key", "after-resume")
			}()
			Eventually(func() any { return api.get("/v1/balance", a.key).JSON()["frozen"] }).Should(BeNumerically("==", 30))
		}
		removed, err := srv.srv.SweepFaces(ctx, time.Now().Add(-apiserver.FaceSweepAge))
		Expect(err).NotTo(HaveOccurred())
		release() // step 5
		var got response
		Eventually(retried).Should(Receive(&got))
		Expect(got.Status).To(Equal(http.StatusAccepted), string(got.Body))
		Expect(tasksIn(a.ns)).To(ConsistOf(HaveField("Spec.Inputs.FaceImageURL", HaveSuffix(face))))
		Expect(storedBlobs(srv)).To(ContainElement(face),
			"the sweep removed %d face(s): the face of task %s, put again by its retry during the sweep, is gone", removed, name)
	})
})

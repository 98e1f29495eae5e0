package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

const keyNamespace = "videogen-system"

var (
	suite     envsuite.Env
	env       *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	ctx       context.Context
	backend   *templateBackend
	api       *apiClient
	// ledgerURL reaches the ledger of the suite's manager.
	ledgerURL string
	registry  *prometheus.Registry
)

func TestAPIServer(t *testing.T) {
	envsuite.Run(t, "REST apiserver Suite (envtest)", 20*time.Second, &suite, func() {
		ctx, env, cfg, k8sClient = suite.Ctx, suite.Env, suite.Config, suite.Client
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: objectMeta(keyNamespace)})).To(Succeed())

		// The controllers, as the manager runs them, with a scripted backend.
		backend = &templateBackend{Backend: testbackend.New()}
		opts := controllers.DefaultOptions()
		opts.Task.PollInterval = 50 * time.Millisecond
		opts.Ledger.SigningKey = []byte("apiserver-test-signing-key-0123456789")
		opts.Ledger.WriteInterval = 50 * time.Millisecond
		routes := generation.Routes{}
		for _, c := range videogenv1alpha1.Capabilities {
			routes[c] = generation.Named{Name: "test-backend", Backend: backend}
		}
		opts.Backends = routes
		controllerMgr := newManager(cache.Options{ByObject: controllers.CacheByObject()}, gatedClient)
		pointsLedger, err := controllers.Setup(controllerMgr, opts)
		Expect(err).NotTo(HaveOccurred())
		start(controllerMgr)
		// The manager serves its ledger to the apiserver replicas, as cmd/manager does.
		ledgerServer := httptest.NewServer(ledger.Handler(pointsLedger))
		DeferCleanup(ledgerServer.Close)
		ledgerURL = ledgerServer.URL
		Eventually(pointsLedger.Ready).Should(BeTrue())

		registry = prometheus.NewRegistry()
		api = startAPIServer(rate.Inf, 1, registry, nil)
	})
}

// templateBackend is the test backend, also scripted by template: a task's name is known only
// after its POST, by when the controller may have dispatched it; its template is known before.
type templateBackend struct {
	*testbackend.Backend
	scripts sync.Map // template id → testbackend.Script
	stalled sync.Map // template id → struct{}
	held    sync.Map // task name → chan struct{}: its cancel waits until the channel closes
}

// ScriptTemplate scripts every task of template tmpl.
func (b *templateBackend) ScriptTemplate(tmpl string, s testbackend.Script) { b.scripts.Store(tmpl, s) }

// Stall keeps every task of template tmpl queued, its points frozen: the backend answers busy.
func (b *templateBackend) Stall(tmpl string) { b.stalled.Store(tmpl, struct{}{}) }

// HoldCancel makes the backend's cancel of task's work wait until release is called: a cancel
// that was requested but has not stopped the work yet.
func (b *templateBackend) HoldCancel(task string) (release func()) {
	ch := make(chan struct{})
	b.held.Store(task, ch)
	release = sync.OnceFunc(func() { close(ch); b.held.Delete(task) })
	DeferCleanup(release)
	return release
}

func (b *templateBackend) Cancel(ctx context.Context, w generation.Work, handle string) error {
	if ch, ok := b.held.Load(w.Task); ok {
		select {
		case <-ch.(chan struct{}):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return b.Backend.Cancel(ctx, w, handle)
}

func (b *templateBackend) Submit(ctx context.Context, w generation.Work) (string, error) {
	if _, ok := b.stalled.Load(w.TemplateID); ok {
		return "", errors.New("test backend busy") // not permanent: the controller retries
	}
	if s, ok := b.scripts.Load(w.TemplateID); ok {
		b.Set(w.Task, s.(testbackend.Script))
	}
	return b.Backend.Submit(ctx, w)
}

func newManager(co cache.Options, newClient ...client.NewClientFunc) ctrl.Manager {
	mo := ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Cache: co,
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	}
	if len(newClient) > 0 {
		mo.NewClient = newClient[0]
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	Expect(err).NotTo(HaveOccurred())
	return mgr
}

// heldCreates holds the ledger's create of a VideoTask whose name is a key, until its channel
// is closed: a request caught between its admission and its create.
var heldCreates sync.Map // task name → chan struct{}

// holdCreate makes the ledger's create of task name wait until release is called.
func holdCreate(name string) (release func()) {
	ch := make(chan struct{})
	heldCreates.Store(name, ch)
	return sync.OnceFunc(func() { close(ch); heldCreates.Delete(name) })
}

// gatedClient is the manager's client, with creates of VideoTasks in heldCreates held.
func gatedClient(c *rest.Config, o client.Options) (client.Client, error) {
	base, err := client.New(c, o)
	if err != nil {
		return nil, err
	}
	return interceptor.NewClient(noWatch{base}, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if ch, ok := heldCreates.Load(obj.GetName()); ok {
				<-ch.(chan struct{})
			}
			return c.Create(ctx, obj, opts...)
		},
	}), nil
}

func start(mgr ctrl.Manager) {
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
}

// startAPIServer runs an apiserver replica as cmd/apiserver wires it, behind a real HTTP
// server, asking the suite's ledger. wrap, if set, wraps the replica's client (for fault
// injection).
func startAPIServer(limit rate.Limit, burst int, reg prometheus.Registerer, wrap func(client.Client) client.Client) *apiClient {
	return startAPIServerWith(limit, burst, reg, wrap, &ledger.Client{URL: ledgerURL})
}

// The specs that must hold whichever replica serves a request run on the suite's replica and
// on a second one.
var (
	firstReplica  = func() *apiClient { return api }
	secondReplica = func() *apiClient { return startAPIServer(rate.Inf, 1, nil, nil) }
)

func startAPIServerWith(limit rate.Limit, burst int, reg prometheus.Registerer, wrap func(client.Client) client.Client, l apiserver.Ledger) *apiClient {
	mgr := newManager(cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{keyNamespace: {}},
			Label:      labels.SelectorFromSet(labels.Set{apikeys.LabelAPIKey: "true"}),
		},
	}})
	c := mgr.GetClient()
	if wrap != nil {
		c = wrap(c)
	}
	blobs := &blobstore.Dir{Root: GinkgoT().TempDir()}
	srv := apiserver.New(apiserver.Config{
		Client:         c,
		APIReader:      mgr.GetAPIReader(),
		Ledger:         l,
		Keys:           &apikeys.Authenticator{Reader: mgr.GetClient(), Namespace: keyNamespace},
		Blobs:          blobs,
		DefaultPrice:   10,
		RateLimit:      limit,
		RateBurst:      burst,
		Registerer:     reg,
		WebhookSecrets: &webhooksecrets.Store{Client: c, Reader: mgr.GetAPIReader(), Namespace: keyNamespace},
		Logger:         slog.New(slog.NewTextHandler(GinkgoWriter, nil)),
	})
	srv.Mux().Handle("GET /v1/blobs/", blobs.Handler("/v1/blobs/"))
	start(mgr)
	hs := httptest.NewServer(srv.Handler())
	DeferCleanup(hs.Close)
	blobs.BaseURL = hs.URL + "/v1/blobs/"
	// Redirects are answers to check, not to follow: the API never redirects.
	hc := hs.Client()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &apiClient{base: hs.URL, http: hc, blobDir: blobs.Root, srv: srv}
}

// --- HTTP client helpers -------------------------------------------------------------

type apiClient struct {
	base    string
	http    *http.Client
	blobDir string // where this replica's blob store keeps its files
	srv     *apiserver.Server
}

type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) JSON() map[string]any {
	var m map[string]any
	ExpectWithOffset(1, json.Unmarshal(r.Body, &m)).To(Succeed(), string(r.Body))
	return m
}

// ErrorCode returns error.code after checking the error shape and request id.
func (r response) ErrorCode() string {
	m := r.JSON()
	e, ok := m["error"].(map[string]any)
	ExpectWithOffset(1, ok).To(BeTrue(), "error body: %s", r.Body)
	ExpectWithOffset(1, e["request_id"]).To(HavePrefix("req_"))
	ExpectWithOffset(1, e["request_id"]).To(Equal(r.Header.Get("X-Request-Id")))
	ExpectWithOffset(1, e["message"]).NotTo(BeEmpty())
	return e["code"].(string)
}

// expectClusterUnavailable checks the answer to a request the kube-apiserver did not answer:
// 503 service_unavailable with Retry-After, no 500.
func expectClusterUnavailable(r response) {
	GinkgoHelper()
	Expect(r.Status).To(Equal(http.StatusServiceUnavailable), string(r.Body))
	Expect(r.ErrorCode()).To(Equal("service_unavailable"))
	Expect(r.Message()).To(ContainSubstring("did not answer in time"))
	Expect(r.Header.Get("Retry-After")).To(Equal("5"))
}

func (r response) Message() string {
	return r.JSON()["error"].(map[string]any)["message"].(string)
}

type call struct {
	method, path, key string
	body              any
	headers           map[string]string
}

func (a *apiClient) do(c call) response {
	var body io.Reader
	switch b := c.body.(type) {
	case nil:
	case string:
		body = bytes.NewBufferString(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		Expect(err).NotTo(HaveOccurred())
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, a.base+c.path, body)
	Expect(err).NotTo(HaveOccurred())
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	resp, err := a.http.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.Header.Get("X-Request-Id")).To(HavePrefix("req_"), "every response carries a request id")
	r := response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
	checkAgainstOpenAPI(c.method, c.path, r)
	return r
}

func (a *apiClient) get(path, key string) response {
	return a.do(call{method: "GET", path: path, key: key})
}

func (a *apiClient) post(path, key string, body any, headers ...string) response {
	h := map[string]string{}
	for i := 0; i+1 < len(headers); i += 2 {
		h[headers[i]] = headers[i+1]
	}
	return a.do(call{method: "POST", path: path, key: key, body: body, headers: h})
}

// --- fixtures ----------------------------------------------------------------------

// account is a namespace with a PointAccount holding balance points and an API key.
type account struct {
	ns  string
	key string
}

// newAccount is the suite's account (envsuite) with an API key the apiserver already knows.
func newAccount(balance int64) account {
	GinkgoHelper()
	ns := suite.NewAccount(balance)
	key, _, err := apikeys.Issue(ctx, k8sClient, keyNamespace, ns, "test key")
	Expect(err).NotTo(HaveOccurred())
	// The apiserver learns keys through its informer.
	Eventually(func() int { return api.get("/v1/balance", key).Status }).Should(Equal(http.StatusOK))
	return account{ns: ns, key: key}
}

// topUp credits amount to the account and waits until it is applied.
func topUp(ns string, amount int64) {
	GinkgoHelper()
	suite.Applied(suite.TopUp(ns, envsuite.Unique("topup"), amount))
}

// expectCharged asserts the balance and that charged points are frozen or spent (a task may
// finish at any moment, moving them from one to the other).
func expectCharged(ns string, balance, charged int64) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		st := suite.AccountOf(ns).Status
		g.Expect(st.Credited).To(Equal(st.Balance+st.Frozen+st.Spent), "credited = balance + frozen + spent")
		g.Expect([]int64{st.Balance, st.Frozen + st.Spent}).To(Equal([]int64{balance, charged}), "balance, frozen+spent")
	}).Should(Succeed())
}

func tasksIn(ns string) []videogenv1alpha1.VideoTask {
	var l videogenv1alpha1.VideoTaskList
	Expect(k8sClient.List(ctx, &l, client.InNamespace(ns))).To(Succeed())
	return l.Items
}

func template(capability videogenv1alpha1.Capability, price *int64, adjust func(*videogenv1alpha1.TemplateSpec)) string {
	t := &videogenv1alpha1.Template{ObjectMeta: objectMeta(envsuite.Unique("tmpl"))}
	t.Spec = videogenv1alpha1.TemplateSpec{Capability: capability, DisplayName: "Template " + t.Name, Price: price,
		CoverURL: "https://cdn.example.com/" + t.Name + ".jpg", MediaURL: "https://cdn.example.com/" + t.Name + ".mp4"}
	if adjust != nil {
		adjust(&t.Spec)
	}
	Expect(k8sClient.Create(ctx, t)).To(Succeed())
	return t.Name
}

// waitTask polls GET /v1/tasks/{id} until the task reaches status.
func waitTask(a account, id, status string) map[string]any {
	GinkgoHelper()
	var task map[string]any
	Eventually(func() any {
		task = api.get("/v1/tasks/"+id, a.key).JSON()
		return task["status"]
	}).Should(Equal(status))
	return task
}

// landsThenTimesOut wraps a replica's client so that its creates, updates, patches and deletes
// of the objects write matches answer the kube-apiserver's 504 (etcd slow): after the write
// landed when land is set, without it otherwise. Other requests go through.
func landsThenTimesOut(land *atomic.Bool, write func(client.Object) bool) func(client.Client) client.Client {
	timeout := apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)
	answer := func(obj client.Object, do func() error) error {
		if !write(obj) {
			return do()
		}
		if land.Load() {
			if err := do(); err != nil {
				return err
			}
		}
		return timeout
	}
	return func(c client.Client) client.Client {
		return interceptor.NewClient(noWatch{c}, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				return answer(obj, func() error { return c.Create(ctx, obj, opts...) })
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				return answer(obj, func() error { return c.Update(ctx, obj, opts...) })
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				return answer(obj, func() error { return c.Patch(ctx, obj, patch, opts...) })
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				return answer(obj, func() error { return c.Delete(ctx, obj, opts...) })
			},
		})
	}
}

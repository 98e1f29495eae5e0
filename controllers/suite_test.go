package controllers_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/outbound"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

var (
	suite     envsuite.Env
	env       *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	ctx       context.Context
)

func TestControllers(t *testing.T) {
	envsuite.Run(t, "Controllers Suite (envtest)", 20*time.Second, &suite, func() {
		ctx, env, cfg, k8sClient = suite.Ctx, suite.Env, suite.Config, suite.Client
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: webhookSecretNamespace}})).To(Succeed())
	})
}

// testOptions are fast settings for tests: short polls and grace periods.
func testOptions(backend generation.Backend) controllers.Options {
	opts := controllers.DefaultOptions()
	opts.Task.PollInterval = 50 * time.Millisecond
	opts.Task.DefaultTimeout = time.Minute
	opts.Task.DefaultPrice = 10
	opts.Ledger.SigningKey = []byte("controllers-test-signing-key-0123456789")
	opts.Ledger.WriteInterval = 50 * time.Millisecond
	routes := generation.Routes{}
	for _, c := range videogenv1alpha1.Capabilities {
		routes[c] = generation.Named{Name: "test-backend", Backend: backend}
	}
	opts.Backends = routes
	// Completion webhooks: fast retries, and loopback allowed for the test receivers.
	opts.Webhooks.Schedule = []time.Duration{150 * time.Millisecond, 300 * time.Millisecond}
	opts.Webhooks.Client = outbound.NewGuardedClient(netguard.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, 2*time.Second)
	opts.Webhooks.SecretNamespace = webhookSecretNamespace
	return opts
}

const webhookSecretNamespace = "videogen-system"

// startManager runs the controllers in a manager of their own and returns a function that
// stops it and waits until it has stopped (as a crash would, minus the abruptness).
// newClient, if given, builds the manager's client (the crash test injects faults with it).
func startManager(opts controllers.Options, newClient ...client.NewClientFunc) (stop func()) {
	mo := ctrl.Options{
		Scheme:  env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{ByObject: controllers.CacheByObject()},
		// Tests start several managers in one process; controller names repeat.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	}
	if len(newClient) > 0 {
		mo.NewClient = newClient[0]
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	Expect(err).NotTo(HaveOccurred())
	l, err := controllers.Setup(mgr, opts)
	Expect(err).NotTo(HaveOccurred())
	mctx, mcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	// A manager never outlives its spec, even one that fails before calling stop: a leaked
	// manager's ledger would fight every later one over the accounts and slow the whole suite.
	stop = sync.OnceFunc(func() { mcancel(); <-done })
	DeferCleanup(stop)
	// A spec starts once the ledger keeps the books, so that a slow start (many accounts left by
	// earlier specs, a loaded machine, injected write faults) does not eat the spec's own timeouts.
	started := time.Now()
	Eventually(l.Ready, time.Minute).Should(BeTrue(), "the ledger builds its books")
	GinkgoWriter.Printf("ledger ready after %v\n", time.Since(started).Round(time.Millisecond))
	return stop
}

// startLedger runs only a ledger (no controller), as the elected manager would, until stopped.
func startLedger() (*ledger.Ledger, func()) {
	return startLedgerWithCache(cache.Options{ByObject: controllers.CacheByObject()})
}

// accountWithALedger is an account of points that no PointAccount controller runs, and a
// ledger started for the spec (stopped when it ends): the set-up of the reroute specs.
func accountWithALedger(points int64) (string, *ledger.Ledger) {
	ns := accountWithoutController(points)
	l, stop := startLedger()
	DeferCleanup(stop)
	return ns, l
}

// startLedgerWithCache is startLedger over a cache of those options (a lagging one, say).
func startLedgerWithCache(cacheOpts cache.Options) (*ledger.Ledger, func()) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:      cacheOpts,
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	signer, err := ledger.NewSigner(testOptions(nil).Ledger.SigningKey)
	Expect(err).NotTo(HaveOccurred())
	l := ledger.New(ledger.Config{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Cache: mgr.GetCache(),
		Signer: signer, Identity: ledger.NewIdentity(), WriteInterval: 50 * time.Millisecond})
	Expect(mgr.Add(l)).To(Succeed())
	mctx, mcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	stop := sync.OnceFunc(func() { mcancel(); <-done })
	DeferCleanup(stop)
	Eventually(l.Ready).Should(BeTrue())
	return l, stop
}

// intercepted is a NewClientFunc for startManager: the manager's client sends every call
// through funcs first (faults, conflicts, lost answers).
func intercepted(funcs interceptor.Funcs) client.NewClientFunc {
	return func(c *rest.Config, o client.Options) (client.Client, error) {
		base, err := client.NewWithWatch(c, o)
		if err != nil {
			return nil, err
		}
		return interceptor.NewClient(base, funcs), nil
	}
}

package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/outbound"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

// Loopback is the allow-list that lets webhooks and inputs point at this machine.
var Loopback = netguard.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

// APIServer is the REST apiserver wired as cmd/apiserver wires it, behind a real HTTP server
// on loopback.
type APIServer struct {
	URL  string
	HTTP *http.Client
}

// StartAPIServer runs the apiserver in-process until ctx ends, asking the ledger l (a
// *ledger.Client, as cmd/apiserver does); its client's writes are counted under "apiserver" by
// counter (if not nil). Rate limiting per key is off.
func (e *Env) StartAPIServer(ctx context.Context, counter *Counter, conns int, l apiserver.Ledger) (*APIServer, error) {
	mgr, err := ctrl.NewManager(e.Cfg, ctrl.Options{
		Scheme: e.Env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {
				Namespaces: map[string]cache.Config{KeyNamespace: {}},
				Label:      labels.SelectorFromSet(labels.Set{apikeys.LabelAPIKey: "true"}),
			},
		}},
	})
	if err != nil {
		return nil, err
	}
	c := mgr.GetClient()
	if counter != nil {
		c = counter.Wrap("apiserver", c)
	}
	blobDir, err := os.MkdirTemp("", "bench-blobs-")
	if err != nil {
		return nil, err
	}
	srv := apiserver.New(apiserver.Config{
		Client:         c,
		APIReader:      mgr.GetAPIReader(),
		Ledger:         l,
		Keys:           &apikeys.Authenticator{Reader: mgr.GetClient(), Namespace: KeyNamespace},
		Blobs:          &blobstore.Dir{Root: blobDir},
		URLPolicy:      Loopback,
		DefaultPrice:   10,
		RateLimit:      rate.Inf,
		RateBurst:      1,
		WebhookSecrets: &webhooksecrets.Store{Client: c, Reader: mgr.GetAPIReader(), Namespace: KeyNamespace},
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err := startManager(ctx, mgr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = hs.Close()
		_ = os.RemoveAll(blobDir)
	}()
	return &APIServer{URL: "http://" + ln.Addr().String(), HTTP: LoopbackClient(conns)}, nil
}

// LoopbackClient is an HTTP client that keeps conns connections open.
func LoopbackClient(conns int) *http.Client {
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		MaxIdleConns: conns + 8, MaxIdleConnsPerHost: conns + 8, IdleConnTimeout: time.Minute,
	}}
}

func startManager(ctx context.Context, mgr ctrl.Manager) error {
	errc := make(chan error, 1)
	go func() { errc <- mgr.Start(ctx) }()
	syncCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		select {
		case err := <-errc:
			return fmt.Errorf("manager stopped: %w", err)
		default:
			return errors.New("manager cache did not sync within 60s")
		}
	}
	return nil
}

// ControllerOptions are the manager's defaults (cmd/manager flags unset) with backend serving
// every capability and completion webhooks allowed into loopback, and without the Normal event
// per task step (--task-events=false): the figures in docs/benchmarks.md are for that setting.
func ControllerOptions(backend generation.Backend) controllers.Options {
	opts := controllers.DefaultOptions()
	opts.Task.TransitionEvents = false
	routes := generation.Routes{}
	for _, c := range videogenv1alpha1.Capabilities {
		routes[c] = generation.Named{Name: "bench-backend", Backend: backend}
	}
	opts.Backends = routes
	opts.Webhooks.Client = outbound.NewGuardedClient(Loopback, 10*time.Second)
	opts.Webhooks.SecretNamespace = KeyNamespace
	return opts
}

// StartControllers runs controllers.Setup in an in-process manager until ctx ends, with every
// client it hands out counted per controller, and serves its ledger on loopback as cmd/manager
// does (without authentication): m.Ledger reaches it.
func (e *Env) StartControllers(ctx context.Context, counter *Counter, opts controllers.Options) (*Manager, error) {
	inner, err := ctrl.NewManager(e.Cfg, ctrl.Options{
		Scheme: e.Env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{ByObject: controllers.CacheByObject()},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	m := &Manager{Manager: inner, Counter: counter}
	if opts.Ledger.SigningKey == nil {
		opts.Ledger.SigningKey = []byte("bench-signing-key-bench-signing-key")
	}
	l, err := controllers.Setup(m, opts)
	if err != nil {
		return nil, err
	}
	if err := startManager(ctx, inner); err != nil {
		return nil, err
	}
	m.Ledger, err = serveLedger(ctx, l)
	return m, err
}

// StartLedger runs only the ledger (no controller) in an in-process manager until ctx ends, its
// writes counted under "ledger", and returns a client of it served on loopback: tasks it
// creates stay Pending.
func (e *Env) StartLedger(ctx context.Context, counter *Counter) (*ledger.Client, error) {
	mgr, err := ctrl.NewManager(e.Cfg, ctrl.Options{
		Scheme: e.Env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{ByObject: controllers.CacheByObject()},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	c := mgr.GetClient()
	if counter != nil {
		c = counter.Wrap("ledger", c)
	}
	signer, err := ledger.NewSigner([]byte("bench-signing-key-bench-signing-key"))
	if err != nil {
		return nil, err
	}
	l := ledger.New(ledger.Config{Client: c, Reader: mgr.GetAPIReader(), Cache: mgr.GetCache(), Signer: signer,
		Identity: ledger.NewIdentity(), WriteInterval: time.Second})
	if err := mgr.Add(l); err != nil {
		return nil, err
	}
	if err := startManager(ctx, mgr); err != nil {
		return nil, err
	}
	return serveLedger(ctx, l)
}

// serveLedger serves l on loopback until ctx ends, once it has built its books.
func serveLedger(ctx context.Context, l *ledger.Ledger) (*ledger.Client, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: ledger.Handler(l), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = hs.Close()
	}()
	for !l.Ready() {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return &ledger.Client{URL: "http://" + ln.Addr().String()}, nil // the HTTP client cmd/apiserver uses
}

// InstantBackend completes every stage as soon as it is observed: a benchmark of the operator,
// not of generation.
type InstantBackend struct{}

// Submit implements generation.Backend.
func (InstantBackend) Submit(_ context.Context, w generation.Work) (string, error) {
	return "h-" + w.Key, nil
}

// Observe implements generation.Backend.
func (InstantBackend) Observe(_ context.Context, w generation.Work, _ string) (generation.Observation, error) {
	obs := generation.Observation{State: generation.Succeeded, Progress: 100}
	if w.Stage == videogenv1alpha1.StageAnalyze {
		obs.Outputs = map[string]string{"faces": "1"}
	} else {
		obs.Result = &videogenv1alpha1.TaskResult{URL: "https://media.example/" + w.Task + ".mp4", MediaType: "video/mp4"}
	}
	return obs, nil
}

// Cancel implements generation.Backend.
func (InstantBackend) Cancel(context.Context, generation.Work, string) error { return nil }

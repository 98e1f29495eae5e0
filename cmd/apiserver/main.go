// Command apiserver serves the /v1 REST API. It is a stateless sidecar: it reads through an
// informer cache, writes custom resources, and asks the points ledger in the elected manager to
// admit tasks, so any number of replicas can run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver"
	"github.com/videogen-dev/videogen-operator/apiserver/webhookingress"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/httpserver"
	"github.com/videogen-dev/videogen-operator/internal/imageinput"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/pricing"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "apiserver:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		bindAddr, metricsAddr, probeAddr string
		keyNamespace, publicURL          string
		allowPrivate                     string
		defaultPrice                     int64
		rateLimit                        float64
		rateBurst                        int
		maxBody                          int64
		ledgerURL, ledgerTokenFile       string
		webhooks                         webhookingress.Config
		blobFlags                        blobstore.Flags
		eventTokensFile                  string
		timeouts                         = httpserver.DefaultTimeouts()
		shutdownDelay                    time.Duration
	)
	flag.StringVar(&bindAddr, "bind-address", ":8080", "Address the /v1 API listens on.")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":9090", "Address of the Prometheus metrics endpoint (0 to disable).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8082", "Address of /healthz and /readyz.")
	flag.StringVar(&keyNamespace, "api-key-namespace", envOr("POD_NAMESPACE", "videogen-system"), "Namespace of the Secrets holding API key hashes; $POD_NAMESPACE, the pod's namespace, when set.")
	blobFlags.Bind(flag.CommandLine, "uploaded images", "/var/lib/videogen/blobs", "uploads/")
	flag.StringVar(&publicURL, "public-url", "http://localhost:8080", "Base URL under which this apiserver is reachable by generation backends (blob links).")
	flag.StringVar(&allowPrivate, "allow-private-urls", "", "Comma-separated CIDRs that caller-supplied URLs may point into (private ranges are refused otherwise).")
	flag.Int64Var(&defaultPrice, "default-price", 10, "System default price in points; keep equal to the manager's --default-price.")
	flag.Float64Var(&rateLimit, "rate-limit", 50, "Requests per second allowed per API key, by this replica (each replica keeps its own buckets).")
	flag.IntVar(&rateBurst, "rate-burst", 100, "Burst of requests allowed per API key, by this replica.")
	flag.StringVar(&ledgerURL, "ledger-url", "http://127.0.0.1:8084",
		"URL of the points ledger in the elected manager (its --ledger-bind-address; the Service videogen-ledger with several replicas), which admits tasks and tells balances.")
	flag.StringVar(&ledgerTokenFile, "ledger-token-file", defaultTokenFile(),
		"Bearer token sent to the ledger (this replica's service account token; empty sends none, for a manager run with --ledger-secure=false).")
	flag.Int64Var(&maxBody, "max-body-bytes", 16<<20, "Largest accepted request body (base64 images are large).")
	webhooks.Namespace = envOr("POD_NAMESPACE", "videogen-system")
	webhooks.BindFlags(flag.CommandLine)
	flag.StringVar(&eventTokensFile, "event-service-tokens-file", "",
		"File with the service tokens (one per line) accepted by the EventService.Handle RPC; empty disables the RPC.")
	timeouts.Bind(flag.CommandLine)
	flag.DurationVar(&shutdownDelay, "shutdown-delay", httpserver.DefaultShutdownDelay,
		"How long the servers keep serving after SIGTERM, with /readyz failing, before they shut down gracefully: "+
			"the time the pod's endpoints, kube-proxy and Ingress controllers take to stop routing here (0: none). "+
			"The pod's terminationGracePeriodSeconds must cover it plus the graceful shutdown, 15s.")
	flag.Parse()
	if shutdownDelay < 0 {
		return fmt.Errorf("--shutdown-delay must not be negative, got %v", shutdownDelay)
	}
	if err := timeouts.Check(); err != nil {
		return err
	}
	if err := pricing.CheckDefault(defaultPrice); err != nil {
		return err
	}
	if err := checkRate(rateLimit, rateBurst); err != nil {
		return err
	}

	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	useLogger(logger)
	allow, err := netguard.ParseAllowList(allowPrivate)
	if err != nil {
		return fmt.Errorf("--allow-private-urls: %w", err)
	}

	// Everything runs under ctx, which ends --shutdown-delay after the signal (drainOnSignal).
	ctx, draining := drainOnSignal(ctrl.SetupSignalHandler(), shutdownDelay, time.After, logger)
	restCfg := ctrl.GetConfigOrDie()
	mgr, err := ctrl.NewManager(restCfg, managerOptions(keyNamespace, metricsAddr, probeAddr))
	if err != nil {
		return err
	}
	blobs, err := blobFlags.Open(publicURL + "/v1/blobs/")
	if err != nil {
		return err
	}
	srv := apiserver.New(apiserver.Config{
		Client:         mgr.GetClient(),
		APIReader:      mgr.GetAPIReader(),
		Ledger:         &ledger.Client{URL: strings.TrimSuffix(ledgerURL, "/"), TokenFile: ledgerTokenFile},
		Keys:           &apikeys.Authenticator{Reader: mgr.GetClient(), Namespace: keyNamespace},
		Blobs:          blobs,
		URLPolicy:      netguard.Policy{Allow: allow},
		DefaultPrice:   defaultPrice,
		MaxBodyBytes:   maxBody,
		ImageLimits:    imageinput.DefaultLimits,
		RateLimit:      rate.Limit(rateLimit),
		RateBurst:      rateBurst,
		Registerer:     crmetrics.Registry,
		WebhookSecrets: &webhooksecrets.Store{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: keyNamespace},
		Logger:         logger,
	})
	if dir, ok := blobs.(*blobstore.Dir); ok {
		srv.Mux().Handle("GET /v1/blobs/", dir.Handler("/v1/blobs/"))
	}

	// Payment webhooks: POST /v1/webhooks/{connector}, verified and stored as PaymentEvents.
	// The ingress only creates PaymentEvents (and reads one back on a duplicate): a direct
	// client, so no cluster-wide PaymentEvent informer is started for a namespaced Role.
	direct, err := client.New(restCfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	webhooks.Logger = logger
	ingress, err := webhookingress.Setup(ctx, restCfg, direct, webhooks, crmetrics.Registry)
	if err != nil {
		return err
	}
	ingress.Register(srv.Mux())
	if eventTokensFile != "" {
		if err := mountEventService(srv.Mux(), ingress.Service(), eventTokensFile, logger); err != nil {
			return err
		}
	}

	// HTTP/1.1 for REST and webhooks, cleartext HTTP/2 for gRPC callers of the Event Service.
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	// One listener for REST, webhooks, the Event Service and blobs: every one gets the deadlines.
	httpServer := httpserver.New(bindAddr, srv.Handler(), timeouts)
	httpServer.Protocols = &protocols
	// net/http's own errors (a failed TLS or HTTP/2 handshake, a bad request line) as JSON too.
	httpServer.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	listener, err := net.Listen("tcp", bindAddr)
	if err != nil {
		return err
	}
	if err := addServing(ctx, mgr, httpServer, listener, draining, logger); err != nil {
		return err
	}
	// Faces of submissions that created no task, and of tasks since deleted, are removed.
	if err := mgr.Add(runnableFunc(srv.RunFaceSweep)); err != nil {
		return err
	}
	logger.Info("starting apiserver", "address", bindAddr, "api_key_namespace", keyNamespace)
	return mgr.Start(ctx)
}

// addServing has mgr serve httpServer on l and answer /healthz and /readyz: ready once the
// caches synced (cachesSynced) and until the drain starts (drainOnSignal). From then on
// httpServer keeps no connection alive: a client's kept-alive connection, which kube-proxy
// keeps sending here whatever the endpoints say, is closed after its next answer (HTTP/2: a
// GOAWAY), and the client's next request opens one to a pod that is not going away.
func addServing(ctx context.Context, mgr ctrl.Manager, httpServer *http.Server, l net.Listener,
	draining *drain, logger *slog.Logger) error {
	if err := mgr.Add(serve(httpServer, l, logger)); err != nil {
		return err
	}
	draining.OnStart(func() { httpServer.SetKeepAlivesEnabled(false) })
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	ready, err := cachesSynced(ctx, mgr)
	if err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("caches", ready); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("shutdown", draining.Check)
}

// checkRate refuses a per-key rate limit that does not limit as written: 0 would fall back to
// the library's default (50) without a word, and a negative rate or burst let one burst through
// and then answered 429 for good. +Inf turns the limit off.
func checkRate(limit float64, burst int) error {
	if math.IsNaN(limit) || limit <= 0 {
		return fmt.Errorf("--rate-limit must be above 0 requests per second (+Inf for none), got %v", limit)
	}
	if burst < 1 {
		return fmt.Errorf("--rate-burst must be at least 1, got %d", burst)
	}
	return nil
}

// managerOptions are the options of the apiserver's manager: its informer cache reads the
// kinds the REST API serves, and only the API key Secrets, in their namespace.
func managerOptions(keyNamespace, metricsAddr, probeAddr string) ctrl.Options {
	return ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			// Cache only the API key Secrets, and only in their namespace.
			&corev1.Secret{}: {
				Namespaces: map[string]cache.Config{keyNamespace: {}},
				Label:      labels.SelectorFromSet(labels.Set{apikeys.LabelAPIKey: "true"}),
			},
		}},
	}
}

// cachedKinds are what the REST API reads through mgr's cache (Config.Client, Keys): API key
// Secrets and the namespaces they were issued for, tasks, templates, short templates and
// accounts.
func cachedKinds() []client.Object {
	return []client.Object{&corev1.Secret{}, &corev1.Namespace{}, &videogenv1alpha1.VideoTask{}, &videogenv1alpha1.Template{},
		&videogenv1alpha1.ShortTemplate{}, &videogenv1alpha1.PointAccount{}}
}

// cachesSynced is the readiness check: it passes once the informers of every cached kind
// have synced; before that every key would look invalid, and a request would wait on the list
// of all tasks. It makes the informers now, before mgr starts: WaitForCacheSync waits only for
// the informers that exist, and the cache makes one at its kind's first read, so without them
// the check passed at once, and the first requests after a rollout waited out the lists.
func cachesSynced(ctx context.Context, mgr ctrl.Manager) (healthz.Checker, error) {
	for _, obj := range cachedKinds() {
		if _, err := mgr.GetCache().GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err != nil {
			return nil, fmt.Errorf("watching %T: %w", obj, err)
		}
	}
	return func(r *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(r.Context()) {
			return errors.New("caches not synced")
		}
		return nil
	}, nil
}

// serve runs the HTTP server on l for the manager's lifetime and shuts it down gracefully.
func serve(s *http.Server, l net.Listener, logger *slog.Logger) runnableFunc {
	return func(ctx context.Context) error {
		errc := make(chan error, 1)
		go func() { errc <- s.Serve(httpserver.Listener(l)) }()
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			logger.Info("shutting down the API server")
			shutdownCtx, cancel := context.WithTimeout(context.Background(), httpserver.ShutdownTimeout)
			defer cancel()
			return s.Shutdown(shutdownCtx)
		}
	}
}

type runnableFunc func(context.Context) error

func (f runnableFunc) Start(ctx context.Context) error { return f(ctx) }

// The API server must serve on every replica, not only on a leader.
func (f runnableFunc) NeedLeaderElection() bool { return false }

// defaultTokenFile is the in-cluster service account token, if there is one.
func defaultTokenFile() string {
	const inCluster = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	if _, err := os.Stat(inCluster); err == nil {
		return inCluster
	}
	return ""
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

package apiserver

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/openapi"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
	"github.com/videogen-dev/videogen-operator/internal/imageinput"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

// Config is what a Server needs. Client reads from an informer cache and writes to the
// kube-apiserver; APIReader reads around the cache when a cache miss may just be lag.
type Config struct {
	Client    client.Client
	APIReader client.Reader
	// Ledger admits and creates tasks and tells balances: the ledger of the elected manager,
	// reached with a ledger.Client.
	Ledger Ledger
	Keys   *apikeys.Authenticator
	Blobs  blobstore.Store
	// URLPolicy decides which caller-supplied URLs are acceptable (no private addresses).
	URLPolicy netguard.Policy
	// DefaultPrice is the system default price (keep it equal to the manager's --default-price).
	DefaultPrice int64
	// MaxBodyBytes caps request bodies (base64 images make them large).
	MaxBodyBytes int64
	ImageLimits  imageinput.Limits
	// RateLimit and RateBurst bound requests per API key.
	RateLimit rate.Limit
	RateBurst int
	// WebhookSecrets keeps the accounts' completion webhook signing secrets.
	WebhookSecrets *webhooksecrets.Store
	// WebhookSecretOverlap is how long a rotated-out secret keeps signing (default 24 h).
	WebhookSecretOverlap time.Duration
	// Registerer receives the request metrics and the count of calls to the Ledger
	// (videogen_api_ledger_calls_total; nil: not exported).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	Clock      clock.PassiveClock
}

// Ledger is what the REST API needs of the points ledger (a *ledger.Client, or in tests the
// *ledger.Ledger itself).
type Ledger interface {
	CreateTask(ctx context.Context, task *videogenv1alpha1.VideoTask, price int64) (*videogenv1alpha1.VideoTask, error)
	Balance(ctx context.Context, namespace string) (ledger.Figures, error)
}

// Server serves the /v1 API.
type Server struct {
	cfg     Config
	limiter *keyLimiter
	metrics *metrics
	mux     *http.ServeMux
	// routeList is every /v1 route this server itself serves, as "METHOD /path".
	routeList []string
}

// Routes lists the /v1 routes the server serves itself (not those mounted on Mux()), as
// "METHOD /path" patterns; the OpenAPI document must describe each.
func (s *Server) Routes() []string { return append([]string(nil), s.routeList...) }

// New builds a Server; Mount more routes on Mux() (webhooks, blobs) before serving Handler().
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 16 << 20
	}
	if cfg.ImageLimits == (imageinput.Limits{}) {
		cfg.ImageLimits = imageinput.DefaultLimits
	}
	if cfg.WebhookSecretOverlap <= 0 {
		cfg.WebhookSecretOverlap = 24 * time.Hour
	}
	if cfg.RateLimit == 0 {
		cfg.RateLimit, cfg.RateBurst = 50, 100
	}
	s := &Server{cfg: cfg, limiter: newKeyLimiter(cfg.RateLimit, cfg.RateBurst), metrics: newMetrics(cfg.Registerer), mux: http.NewServeMux()}
	if s.cfg.Ledger != nil {
		s.cfg.Ledger = countedLedger{next: s.cfg.Ledger, calls: s.metrics.ledgerCalls}
	}
	s.routes()
	return s
}

// Mux is the router, for mounting routes that authenticate on their own (webhook ingress).
func (s *Server) Mux() *http.ServeMux { return s.mux }

// Handler is the whole API with request ids, metrics, logging and panic recovery around it.
func (s *Server) Handler() http.Handler {
	return httpjson.WithRequestID(s.observe(s.recoverPanics(httpjson.RefuseUncleanPaths(s.mux))))
}

func (s *Server) routes() {
	// readsQuery registers a route that reads its own query parameters (queryParams).
	readsQuery := func(pattern string, h func(http.ResponseWriter, *http.Request, apikeys.Principal)) {
		s.mux.Handle(pattern, s.authenticate(h))
		s.routeList = append(s.routeList, pattern)
	}
	// authed registers a route that takes no query parameter: one sent is refused as an unknown
	// body field is, before anything is read or changed. A POST /v1/videos/short?dry_run=true
	// (or ?idempotency_key=…) read as absent would create and charge a task the client meant
	// only to try (or to make once).
	authed := func(pattern string, h func(http.ResponseWriter, *http.Request, apikeys.Principal)) {
		readsQuery(pattern, func(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
			if _, err := queryParams(r); writeRequestError(w, r, err) {
				return
			}
			h(w, r, p)
		})
	}
	readsQuery("GET /v1/templates", s.listTemplates)
	authed("POST /v1/videos/short", s.createShort)
	authed("POST /v1/videos/eraser", s.createEraser)
	authed("POST /v1/videos/template", s.createTemplateVideo)
	authed("POST /v1/images/pose", s.createPose)
	readsQuery("GET /v1/tasks", s.listTasks)
	authed("GET /v1/tasks/{id}", s.getTask)
	authed("POST /v1/tasks/{id}/cancel", s.cancelTask)
	authed("GET /v1/balance", s.getBalance)
	authed("GET /v1/webhook-secret", s.getWebhookSecret)
	authed("POST /v1/webhook-secret/rotate", s.rotateWebhookSecret)
	readsQuery("GET /v1/short-templates", s.listShortTemplates)
	authed("POST /v1/short-templates", s.createShortTemplate)
	authed("GET /v1/short-templates/{id}", s.getShortTemplate)
	authed("PATCH /v1/short-templates/{id}", s.patchShortTemplate)
	authed("DELETE /v1/short-templates/{id}", s.deleteShortTemplate)

	// The document takes no API key, and no query parameter either: ?format=yaml answered
	// with JSON would read as honoured.
	document := openapi.Handler()
	s.mux.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		if _, err := queryParams(r); writeRequestError(w, r, err) {
			return
		}
		document.ServeHTTP(w, r)
	})
	s.routeList = append(s.routeList, "GET /v1/openapi.json")
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	s.mux.HandleFunc(catchAll, s.noRoute)
}

// catchAll takes every request that no route took, so that it too gets the error envelope.
const catchAll = "/"

// probeMethods are the methods a path is tried with to find those it allows.
var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// noRoute answers 405 with Allow for a path served with other methods, else 404. The mux would
// answer 405 itself, but catchAll matches every method first.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	allow := s.allowedMethods(r)
	if len(allow) == 0 {
		httpjson.WriteError(w, r, http.StatusNotFound, httpjson.CodeNotFound, "no such endpoint: "+httpjson.Echo(r.Method+" "+r.URL.Path))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	httpjson.WriteError(w, r, http.StatusMethodNotAllowed, httpjson.CodeMethodNotAllowed,
		httpjson.Echo(r.Method)+" is not allowed on "+httpjson.Echo(r.URL.Path)+"; allowed: "+strings.Join(allow, ", "))
}

// routeLabel is the route a request is counted under: its pattern, or, for one that only
// catchAll took, the path pattern of the routes that serve its path with other methods (a 405:
// DELETE /v1/balance is counted under /v1/balance), else "unmatched" (a 404 of no route), so
// that neither is counted under "/", which names no route.
func (s *Server) routeLabel(r *http.Request) string {
	if r.Pattern != "" && r.Pattern != catchAll {
		return r.Pattern
	}
	if _, path := s.otherRoutes(r); path != "" {
		return path
	}
	return "unmatched"
}

// allowedMethods lists the methods some route other than catchAll serves r's path with, as
// the mux itself routes them (routes mounted on Mux() included).
func (s *Server) allowedMethods(r *http.Request) []string {
	methods, _ := s.otherRoutes(r)
	return methods
}

// otherRoutes probes the mux with r's path and each of probeMethods: the methods some route
// other than catchAll serves it with, and the path pattern of the first such route.
func (s *Server) otherRoutes(r *http.Request) (methods []string, path string) {
	for _, m := range probeMethods {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		_, pattern := s.mux.Handler(probe)
		if pattern == "" || pattern == catchAll {
			continue
		}
		methods = append(methods, m)
		if path == "" {
			path = pattern
			if _, p, found := strings.Cut(pattern, " "); found {
				path = p
			}
		}
	}
	return methods, path
}

// now is the server's clock.
func (s *Server) now() time.Time { return s.cfg.Clock.Now() }

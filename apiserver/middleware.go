package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/bearer"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// authenticate resolves the bearer key to an account and applies the key's rate limit.
func (s *Server) authenticate(h func(http.ResponseWriter, *http.Request, apikeys.Principal)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok, repeated := bearer.FromHeader(r.Header)
		if repeated != nil {
			// Two keys, maybe of two accounts: the first read and the other ignored would charge
			// an account the client did not choose. RFC 6750 §3.1: a repeated token is a 400.
			w.Header().Set("WWW-Authenticate", `Bearer realm="videogen", error="invalid_request"`)
			httpjson.WriteError(w, r, http.StatusBadRequest, httpjson.CodeInvalidRequest, repeated.Error())
			return
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="videogen"`)
			httpjson.WriteError(w, r, http.StatusUnauthorized, httpjson.CodeInvalidAPIKey, "missing API key: send Authorization: Bearer <API_KEY>")
			return
		}
		p, err := s.cfg.Keys.Authenticate(r.Context(), token)
		if errors.Is(err, apikeys.ErrInvalidKey) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="videogen", error="invalid_token"`)
			httpjson.WriteError(w, r, http.StatusUnauthorized, httpjson.CodeInvalidAPIKey, "invalid API key")
			return
		}
		if err != nil {
			s.internalError(w, r, err)
			return
		}
		if wait, ok := s.limiter.allow(p.KeyID); !ok {
			// Whole seconds, in the message as in the header: a client told "8ms" and "1" reads two answers.
			secs := strconv.Itoa(int(math.Ceil(wait.Seconds())))
			w.Header().Set("Retry-After", secs)
			httpjson.WriteError(w, r, http.StatusTooManyRequests, httpjson.CodeRateLimited,
				"rate limit exceeded for this API key; retry in "+secs+" s (Retry-After)")
			return
		}
		h(w, r, p)
	})
}

// keyLimiter is a token bucket per API key.
type keyLimiter struct {
	limit rate.Limit
	burst int
	mu    sync.Mutex
	byKey map[string]*rate.Limiter
	// pruneAt is the number of buckets at which the full ones are dropped (see prune).
	pruneAt int
	now     func() time.Time
}

// minPruneAt is the fewest buckets a prune waits for: below it the map is too small to matter.
const minPruneAt = 1024

func newKeyLimiter(limit rate.Limit, burst int) *keyLimiter {
	return &keyLimiter{limit: limit, burst: max(burst, 1), byKey: map[string]*rate.Limiter{}, pruneAt: minPruneAt, now: time.Now}
}

// allow takes a token, or says how long until one is available.
func (l *keyLimiter) allow(key string) (time.Duration, bool) {
	if l.limit == rate.Inf {
		return 0, true
	}
	// The token is taken under the lock too: a prune between a bucket's lookup and the token
	// taken from it would drop a bucket about to be spent, and the key's next request would
	// find a fresh, full one. The time is read under it as well: times reaching a bucket out of
	// order would count the time between them twice (the limiter moves its clock back).
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	lim := l.byKey[key]
	if lim == nil {
		if len(l.byKey) >= l.pruneAt {
			l.prune(now)
		}
		lim = rate.NewLimiter(l.limit, l.burst)
		l.byKey[key] = lim
	}
	res := lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d, false
	}
	return 0, true
}

// prune drops the buckets that are full: a full bucket answers as a new one would, so dropping
// it changes no answer, and the buckets of keys no longer used (revoked, or of a deleted
// account) do not stay forever. The next prune waits until the map has doubled, so that each
// new key pays for it once on average. Call it with l.mu held.
func (l *keyLimiter) prune(now time.Time) {
	for key, lim := range l.byKey {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.byKey, key)
		}
	}
	l.pruneAt = max(2*len(l.byKey), minPruneAt)
}

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// ledgerCalls counts the calls to the points ledger (ledgercalls.go).
	ledgerCalls *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "videogen_api_requests_total", Help: "REST API requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "videogen_api_request_duration_seconds", Help: "REST API request latency by route, method and status code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "method", "code"}),
		ledgerCalls: newLedgerCalls(),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency, m.ledgerCalls)
	}
	return m
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	// errCode, errMessage: the error envelope the answer carried (httpjson.WriteError).
	errCode, errMessage string
}

// NoteError keeps the answer's error for the request's log line (httpjson.ErrorNoter).
func (r *statusRecorder) NoteError(code, message string) {
	r.errCode, r.errMessage = code, message
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// metricMethod is r.Method as the method label: HTTP's own methods by name, any other token a
// client makes up as "other", so that a request cannot add series (as promhttp does).
func metricMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "other"
}

// observe records metrics and one structured log line per request, with its request id.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		route := s.routeLabel(r)
		code := strconv.Itoa(rec.status)
		elapsed := time.Since(start)
		method := metricMethod(r.Method)
		s.metrics.requests.WithLabelValues(route, method, code).Inc()
		s.metrics.latency.WithLabelValues(route, method, code).Observe(elapsed.Seconds())
		level := slog.LevelInfo
		switch {
		case rec.status == http.StatusServiceUnavailable:
			// Temporary, and the client is told to retry (a ledger being elected during a
			// failover): a warning. The metrics and alerts tell when it lasts.
			level = slog.LevelWarn
		case rec.status >= 500:
			level = slog.LevelError
		}
		attrs := []slog.Attr{slog.String("request_id", httpjson.RequestID(r.Context())), slog.String("method", r.Method),
			slog.String("route", route), slog.Int("status", rec.status), slog.Duration("duration", elapsed)}
		if rec.errCode != "" {
			// Which error: a 503 of a ledger being elected and one of an unreachable store
			// look alike by status alone.
			attrs = append(attrs, slog.String("error_code", rec.errCode), slog.String("error_message", rec.errMessage))
		}
		s.cfg.Logger.LogAttrs(r.Context(), level, "request", attrs...)
	})
}

func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.internalError(w, r, fmt.Errorf("panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// statusClientClosedRequest is nginx's 499: the client hung up before its answer was ready.
// No client ever reads it; the request's metric and log line carry it.
const statusClientClosedRequest = 499

// internalError logs err with the request id and answers 500 without details, or 503 when
// the cluster did not answer (clusterUnavailable). An error that is
// the client's own hanging up (the request's context canceled, and err says so: a ledger call
// the client stopped waiting for) is no fault of the server's: 499, and no error line, so that
// impatient clients during a ledger outage do not count as 5xx (VideogenAPIErrors).
func (s *Server) internalError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && errors.Is(r.Context().Err(), context.Canceled) {
		w.WriteHeader(statusClientClosedRequest)
		return
	}
	if clusterUnavailable(err) {
		// No fault of the request's or of this server's: 503, to retry (clusterdown.go).
		s.cfg.Logger.WarnContext(r.Context(), "the cluster did not answer", "request_id", httpjson.RequestID(r.Context()), "error", err.Error())
		writeClusterUnavailable(w, r)
		return
	}
	s.cfg.Logger.ErrorContext(r.Context(), "internal error", "request_id", httpjson.RequestID(r.Context()), "error", err.Error())
	httpjson.WriteError(w, r, http.StatusInternalServerError, httpjson.CodeInternal, "internal error; quote the request id when reporting it")
}

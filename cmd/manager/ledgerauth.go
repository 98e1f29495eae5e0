package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/util/webhook"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/videogen-dev/videogen-operator/internal/bearer"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// ledgerAuth admits a ledger caller as controller-runtime's metrics filter does (a TokenReview,
// then a SubjectAccessReview on the request's path, both cached), with one difference: a token
// the kube-apiserver does not accept is a 401. The metrics filter answers it with a 500 and logs
// an error with a stack trace, so anyone who can reach the port filled the manager's log with
// errors by sending "Authorization: Bearer x". A review that could not be made (the
// kube-apiserver failed to answer it) is logged as an error and answered 503 not_ready with
// Retry-After: nothing was done, and the REST apiserver's ledger Client retries it within its
// deadline, as it does a manager that is not ready (a 500 is an answer it gives up on at once).
// Refusals are in the ledger's error shape, {"error":{"code","message"}}. Reviews are limited:
// for tokens not accepted before (reviewLimiter) per account if validly signed by the cluster's
// service account issuer (tokenKeys), else per caller address; per user for callers it has not
// allowed lately (denialLimiter), so that neither made-up tokens nor new paths cost a review
// each.
func ledgerAuth(cfg *rest.Config, hc *http.Client, log logr.Logger) (func(http.Handler) http.Handler, error) {
	return ledgerAuthWithClock(cfg, hc, log, clock.RealClock{})
}

// ledgerAuthWithClock is ledgerAuth with the clock of its limit on failed authentications.
func ledgerAuthWithClock(cfg *rest.Config, hc *http.Client, log logr.Logger, clk clock.PassiveClock) (func(http.Handler) http.Handler, error) {
	authnClient, err := authenticationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	authzClient, err := authorizationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	// The backoff is controller-runtime's (k8s.io/apiserver's DefaultAuthWebhookRetryBackoff).
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	reviews := tokenReviews{client: authnClient, backoff: backoff}
	tokens := cache.New(reviews, false, tokenCacheTTL, tokenCacheTTL)
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authzClient,
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       &backoff,
	}.New()
	if err != nil {
		return nil, err
	}
	limit, denials := newReviewLimiter(clk), newDenialLimiter(clk)
	keys := newTokenKeys(context.Background(), authnClient.RESTClient(), clk, log)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token, ok, repeated := bearer.FromHeader(r.Header)
			if repeated != nil {
				// RFC 6750 §3.1: a 400, and no review of either token (the first read would serve
				// the caller as that account, or refuse it though the other is allowed).
				refuse(w, http.StatusBadRequest, "invalid_request", repeated.Error())
				return
			}
			if !ok {
				refuse(w, http.StatusUnauthorized, "unauthorized", "send Authorization: Bearer <service account token>")
				return
			}
			if !limit.acceptedLately(token) {
				// A new token: a validly signed service account token spends its subject's
				// reviews, any other its address's (tokenKeys).
				subject, signed := keys.subject(r.Context(), token)
				if !limit.allow(remoteHost(r), subject, signed, token) {
					// Too many new tokens from this address (or of this account) were not
					// accepted: this one is not sent for review (each made-up token would be a
					// TokenReview). Retried by the REST apiserver's client, as a manager not
					// ready; a token accepted before passes.
					log.V(1).Info("a ledger caller's token was not reviewed: too many not accepted", "remote", r.RemoteAddr, "subject", subject)
					from := "from this address"
					if signed {
						from = "of " + subject
					}
					refuse(w, http.StatusServiceUnavailable, "not_ready", "too many new tokens "+from+" were not accepted; retry later")
					return
				}
			}
			res, ok, err := tokens.AuthenticateToken(r.Context(), token)
			if err != nil {
				log.Error(err, "Authentication failed")
				refuse(w, http.StatusServiceUnavailable, "not_ready", "the token could not be reviewed; retry")
				return
			}
			if !ok {
				log.V(1).Info("a ledger caller's token was not accepted", "remote", r.RemoteAddr)
				refuse(w, http.StatusUnauthorized, "unauthorized", "the token is not valid")
				return
			}
			limit.accepted(token)
			u := res.User
			if !slices.Contains(u.GetGroups(), user.AllAuthenticated) {
				u = &user.DefaultInfo{Name: u.GetName(), UID: u.GetUID(), Extra: u.GetExtra(),
					Groups: append(slices.Clone(u.GetGroups()), user.AllAuthenticated)}
			}
			allowed, spent, refusedBefore := denials.allow(u.GetName())
			if !allowed && refusedBefore {
				// Refused again and again (a new path each time misses the authorizer's cache):
				// no SubjectAccessReview for each; a caller allowed lately is never refused.
				log.V(1).Info("a ledger caller was not reviewed: too many refusals", "user", u.GetName())
				refuse(w, http.StatusForbidden, "forbidden", fmt.Sprintf("%s may not %s %.200s (refused too often: not reviewed again for a while)", u.GetName(), r.Method, r.URL.Path))
				return
			}
			if !allowed {
				// Not refused yet, but its reviews are on their way: as many requests at once
				// as there are paths would be a review each. Nothing says it is not allowed:
				// retried (the REST apiserver's client does), as a manager not ready.
				log.V(1).Info("a ledger caller was not reviewed: too many reviews at once", "user", u.GetName())
				refuse(w, http.StatusServiceUnavailable, "not_ready", "too many of this caller's requests are being reviewed; retry later")
				return
			}
			if r.Context().Err() != nil {
				// The caller hung up before this request was read (a manager that stood still
				// while the REST apiserver's calls waited, then gave up): its answer reaches
				// nobody. No review is made for it: the webhook authorizer, whose cache of a
				// path lasts minutes, would fail it with the cancelled context and log that as an
				// error with a stack trace, through klog, for every such call. Answered as a
				// review that could not be made is: nothing was done.
				denials.giveBack(spent)
				log.V(1).Info("a ledger caller gave up before it was answered", "user", u.GetName(), "path", r.URL.Path)
				refuse(w, http.StatusServiceUnavailable, "not_ready", "the caller's access could not be reviewed; retry")
				return
			}
			decision, reason, err := authz.Authorize(r.Context(), authorizer.AttributesRecord{
				User: u, Verb: strings.ToLower(r.Method), Path: r.URL.Path})
			if err != nil {
				denials.giveBack(spent) // not a refusal
				if r.Context().Err() != nil {
					// The caller hung up while its review was on its way: not a failure of
					// authorization (the webhook authorizer's error does not wrap the context's).
					log.V(1).Info("a ledger caller gave up before it was answered", "user", u.GetName(), "path", r.URL.Path, "error", err.Error())
				} else {
					log.Error(err, "Authorization failed", "user", u.GetName())
				}
				refuse(w, http.StatusServiceUnavailable, "not_ready", "the caller's access could not be reviewed; retry")
				return
			}
			if decision != authorizer.DecisionAllow {
				denials.denied(u.GetName(), spent)
				log.V(1).Info("a ledger caller is not allowed", "user", u.GetName(), "reason", reason)
				refuse(w, http.StatusForbidden, "forbidden", fmt.Sprintf("%s may not %s %.200s", u.GetName(), r.Method, r.URL.Path))
				return
			}
			denials.allowed(u.GetName()) // allowed: not limited until refused
			next.ServeHTTP(w, r)
		})
	}, nil
}

// reviewedCallers is ledgerAuth as a metrics server's FilterProvider: the manager's /metrics
// (--metrics-secure) refuses a made-up token with a 401 too, not a 500 and an error line.
func reviewedCallers(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		auth, err := ledgerAuth(cfg, hc, quietWhenCallerGaveUp(log))
		if err != nil {
			return nil, err
		}
		return auth(next), nil
	}, nil
}

// tokenReviews asks the kube-apiserver about a token. Unlike k8s.io/apiserver's webhook
// authenticator, which returns the review's "invalid bearer token" as an error, a review that was
// made and said no is (nil, false, nil): only a review that could not be made is an error.
type tokenReviews struct {
	client  authenticationv1.AuthenticationV1Interface
	backoff wait.Backoff
}

func (t tokenReviews) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var review *authnv1.TokenReview
	err := webhook.WithExponentialBackoff(ctx, t.backoff, func() error {
		var err error
		review, err = t.client.TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		return err
	}, webhook.DefaultShouldRetry)
	if err != nil {
		return nil, false, err
	}
	if !review.Status.Authenticated {
		return nil, false, nil
	}
	u := review.Status.User
	extra := map[string][]string{}
	for k, v := range u.Extra {
		extra[k] = v
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra}}, true, nil
}

func refuse(w http.ResponseWriter, status int, code, message string) {
	switch status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", "Bearer")
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Reason  string `json:"reason,omitempty"`
		} `json:"error"`
	}
	body.Error.Code, body.Error.Message = code, message
	if status == http.StatusServiceUnavailable {
		// A review that could not be made, or was not made (the limit): not an election, as the
		// REST apiserver would tell its client of a not_ready without a reason.
		body.Error.Reason = ledger.NotReadyBusy
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(body)
}

// Reviews of tokens not accepted before that a caller address may have: a burst, then one per
// failedReviewEvery. Each review of a token not cached is a TokenReview (to the kube-apiserver
// and on to its token webhooks), and a made-up token is new each time: without a limit, anyone
// who reaches the port makes one per request. A caller whose token is accepted spends one per
// token (its first request; a service account token rotates about hourly).
const (
	failedReviewBurst = 20
	failedReviewEvery = time.Second
	// acceptedTokenTTL is how long after its last acceptance a token the kube-apiserver
	// accepted passes the limit (a caller whose address it shares, as behind a mesh's sidecar,
	// cannot lock it out).
	acceptedTokenTTL = 10 * time.Minute
	// maxLimitedHosts bounds the addresses tracked; idle ones (a full bucket) are dropped first.
	maxLimitedHosts = 4096
	// tokenCacheTTL is how long the token cache keeps a review's result.
	tokenCacheTTL = time.Minute
)

// reviewLimiter limits the reviews of tokens not accepted before: per verified subject for a
// validly signed service account token, else per caller address.
type reviewLimiter struct {
	clock         clock.PassiveClock
	mu            sync.Mutex
	hosts         map[string]*bucket
	swept         time.Time // when hosts was last searched for idle limiters
	subjects      map[string]*bucket
	subjectsSwept time.Time
	good          map[[sha256.Size]byte]time.Time // tokens accepted, until when they pass
	// signed tokens that spent their account's review, until when that review's result is
	// cached: their other requests meanwhile wait for it or read it, and spend none. A review
	// that could not be made keeps it too (as a token accepted before, its retries are
	// reviewed again): else the REST replicas' retries during an outage of the reviews drain
	// their account's reviews, and its tokens are reviewed one a second once they work.
	reviewing      map[[sha256.Size]byte]time.Time
	reviewingSwept time.Time
}

func newReviewLimiter(clk clock.PassiveClock) *reviewLimiter {
	return &reviewLimiter{clock: clk, hosts: map[string]*bucket{}, subjects: map[string]*bucket{},
		good: map[[sha256.Size]byte]time.Time{}, reviewing: map[[sha256.Size]byte]time.Time{}}
}

// acceptedLately says whether token was accepted lately: it passes the limit.
func (f *reviewLimiter) acceptedLately(token string) bool {
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	until, ok := f.good[sha256.Sum256([]byte(token))]
	return ok && now.Before(until)
}

// allow says whether a token not accepted lately may be looked up and reviewed, and spends one
// review (before it, so that concurrent requests do not all pass): of subject if the token is
// signed (a validly signed service account token of subject), once per token (several REST
// replicas share an account, each with many requests in flight with its token when a manager
// is elected), else of host, the address it came from, once per request. A subject that finds
// no room (so many accounts reviewing new tokens at once) is reviewed: it was not forged.
func (f *reviewLimiter) allow(host, subject string, signed bool, token string) bool {
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if signed {
		key := sha256.Sum256([]byte(token))
		if until, ok := f.reviewing[key]; ok && now.Before(until) {
			return true
		}
		if l := limiterFor(f.subjects, subject, now, &f.subjectsSwept); l != nil && !l.AllowN(now, 1) {
			return false
		}
		if !now.Before(f.reviewingSwept.Add(failedReviewEvery)) { // a search at most once a second
			f.reviewingSwept = now
			for k, until := range f.reviewing {
				if !now.Before(until) {
					delete(f.reviewing, k)
				}
			}
		}
		f.reviewing[key] = now.Add(tokenCacheTTL)
		return true
	}
	l := limiterFor(f.hosts, host, now, &f.swept)
	if l == nil {
		return false // so many addresses reviewing tokens at once: none more
	}
	return l.AllowN(now, 1)
}

// accepted remembers a token the kube-apiserver accepted, for acceptedTokenTTL from now: a
// token in use stays accepted (the token cache reviews it again every minute), so a flood from
// its address never makes it spend a review.
func (f *reviewLimiter) accepted(token string) {
	now := f.clock.Now()
	key := sha256.Sum256([]byte(token))
	f.mu.Lock()
	defer f.mu.Unlock()
	if until, ok := f.good[key]; ok && now.Before(until) {
		f.good[key] = now.Add(acceptedTokenTTL)
		return
	}
	for k, until := range f.good {
		if !now.Before(until) {
			delete(f.good, k)
		}
	}
	f.good[key] = now.Add(acceptedTokenTTL)
}

// denialLimiter limits the SubjectAccessReviews of a user the ledger has not allowed lately:
// failedReviewBurst, then one a second, each spent before its review. Any pod's service account
// token is accepted, and the authorizer's cache is keyed by the path: without it, a caller not
// allowed made one review per new path (and, until its first refusal came back, one per
// request at once). A user allowed by its last review is not limited (allowedUsers): it is in
// the ledger role, which the cluster's admin grants, so that set stays small.
type denialLimiter struct {
	clock        clock.PassiveClock
	mu           sync.Mutex
	users        map[string]*bucket
	swept        time.Time // when users was last searched for idle limiters
	allowedUsers map[string]struct{}
}

func newDenialLimiter(clk clock.PassiveClock) *denialLimiter {
	return &denialLimiter{clock: clk, users: map[string]*bucket{}, allowedUsers: map[string]struct{}{}}
}

// allow says whether user may be reviewed: allowed by its last review, or reviews left. A user
// not allowed lately spends one now, before the review (spent), so that concurrent requests do
// not all pass on the same one left; giveBack returns it if the review could not be made. Not
// allowed, refusedBefore says whether its last review refused it (else its reviews are all on
// their way).
func (d *denialLimiter) allow(user string) (ok bool, spent *rate.Reservation, refusedBefore bool) {
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.allowedUsers[user]; ok {
		return true, nil, false
	}
	b := limiterFor(d.users, user, now, &d.swept)
	if b == nil {
		// So many users not allowed are being reviewed that none more is counted: one never
		// refused is reviewed (it may be the REST apiserver, after a failover), as it was
		// before the first-burst limit; a refusal then is not counted either.
		return true, nil, false
	}
	r := b.ReserveN(now, 1)
	if !r.OK() || r.DelayFrom(now) > 0 {
		r.CancelAt(now)
		return false, nil, b.refused
	}
	return true, r, b.refused
}

// giveBack returns a review allow spent that was not a refusal.
func (d *denialLimiter) giveBack(spent *rate.Reservation) {
	if spent != nil {
		d.mu.Lock()
		defer d.mu.Unlock()
		spent.CancelAt(d.clock.Now())
	}
}

// allowed drops the reviews counted of a user the ledger allowed: not limited from now on.
func (d *denialLimiter) allowed(user string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.users, user)
	d.allowedUsers[user] = struct{}{}
}

// denied counts a refusal of user (spent: the review allow spent for it; nil if it was allowed
// before, and counted now).
func (d *denialLimiter) denied(user string, spent *rate.Reservation) {
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.allowedUsers, user)
	if b := limiterFor(d.users, user, now, &d.swept); b != nil {
		b.refused = true
		if spent == nil {
			b.AllowN(now, 1)
		}
	}
}

// bucket is a caller address's or a user's reviews.
type bucket struct {
	*rate.Limiter
	refused bool // a user's last review refused it
}

// limiterFor is key's limiter in m (by caller address, or by user), made if m has none, after
// dropping the idle ones (a full bucket: as good as new) when m holds maxLimitedHosts; nil if
// it is still full then. The search for idle ones goes through all of m: it is made at most
// once per failedReviewEvery (swept: when it was last made), else a flood of new addresses
// while m is full of busy ones made each request a search of maxLimitedHosts under the lock
// every request takes. Call it with m's lock held.
func limiterFor(m map[string]*bucket, key string, now time.Time, swept *time.Time) *bucket {
	if l := m[key]; l != nil {
		return l
	}
	if len(m) >= maxLimitedHosts && !now.Before(swept.Add(failedReviewEvery)) {
		*swept = now
		for k, other := range m {
			if other.TokensAt(now) >= failedReviewBurst {
				delete(m, k)
			}
		}
	}
	if len(m) >= maxLimitedHosts {
		return nil
	}
	b := &bucket{Limiter: rate.NewLimiter(rate.Every(failedReviewEvery), failedReviewBurst)}
	m[key] = b
	return b
}

// remoteHost is the address a request came from, without its port.
func remoteHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

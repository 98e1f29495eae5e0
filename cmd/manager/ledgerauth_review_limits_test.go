package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// reviewCounter is a kube-apiserver that answers TokenReviews (only goodToken is a user:
// theReplica) and SubjectAccessReviews (only theReplica is allowed), and counts them.
type reviewCounter struct {
	mu                   sync.Mutex
	tokenReviews, access int
	also                 map[string]string // more tokens it accepts, with their users
}

const (
	goodToken  = "the-replicas-service-account-token"
	theReplica = "system:serviceaccount:videogen-system:videogen-apiserver"
)

func (k *reviewCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	k.mu.Lock()
	defer k.mu.Unlock()
	switch r.URL.Path {
	case "/apis/authentication.k8s.io/v1/tokenreviews":
		k.tokenReviews++
		var in authnv1.TokenReview
		_ = json.Unmarshal(body, &in)
		out := authnv1.TokenReview{TypeMeta: metav1.TypeMeta{Kind: "TokenReview", APIVersion: "authentication.k8s.io/v1"}}
		if in.Spec.Token == goodToken {
			out.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: theReplica, Groups: []string{"system:serviceaccounts"}}}
		} else if u, ok := k.also[in.Spec.Token]; ok {
			out.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: u, Groups: []string{"system:serviceaccounts"}}}
		}
		_ = json.NewEncoder(w).Encode(out)
	case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		k.access++
		var in authzv1.SubjectAccessReview
		_ = json.Unmarshal(body, &in)
		in.Status = authzv1.SubjectAccessReviewStatus{Allowed: in.Spec.User == theReplica}
		in.TypeMeta = metav1.TypeMeta{Kind: "SubjectAccessReview", APIVersion: "authorization.k8s.io/v1"}
		_ = json.NewEncoder(w).Encode(in)
	default:
		http.NotFound(w, r)
	}
}

func (k *reviewCounter) counts() (int, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.tokenReviews, k.access
}

// ledgerCall sends one request to h from remote (host:port) with token, and returns its status.
func ledgerCall(h http.Handler, remote, path, token string) int {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = remote
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func newReviewedLedger(t *testing.T, kube *reviewCounter) http.Handler {
	t.Helper()
	return newReviewedLedgerAt(t, kube, clock.RealClock{})
}

// newReviewedLedgerAt is newReviewedLedger with kube any fake kube-apiserver and clk the clock
// of the limit on failed authentications.
func newReviewedLedgerAt(t *testing.T, kube http.Handler, clk clock.PassiveClock) http.Handler {
	t.Helper()
	srv := httptest.NewServer(kube)
	t.Cleanup(srv.Close)
	// QPS -1: no client-side limit, as the manager's config (controller-runtime's GetConfig).
	cfg := &rest.Config{Host: srv.URL, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := ledgerAuthWithClock(cfg, hc, logr.Discard(), clk)
	if err != nil {
		t.Fatal(err)
	}
	return auth(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
}

// Measured, then capped: every new bearer token
// sent to the ledger's port (or the manager's /metrics) was one TokenReview. The token cache
// (k8s.io/apiserver's, keyed by the token's hash) keeps a failure for a minute, so the same
// made-up token costs one review a minute; but a new random token misses it every time.
// Input: anyone who reaches the port (a ClusterIP Service: any pod of the cluster) loops
// `curl -H "Authorization: Bearer $RANDOM$RANDOM" http://videogen-ledger:8084/ledger/v1/...`.
// Measured before the fix: 200 requests, 200 TokenReviews (each up to 16 KiB), on the
// manager's one connection to the kube-apiserver (shared with the ledger's writes and every
// controller) and on to the kube-apiserver's token webhooks. Want: failed authentications are
// limited per caller address (a burst, then about one a second): the rest are refused with no
// review (503 not_ready with Retry-After, which the REST apiserver's client retries within its
// deadline); and a real token's first request from another address is reviewed and served.
func TestRandomTokensDoNotEachCostATokenReview(t *testing.T) {
	kube := &reviewCounter{}
	h := newReviewedLedger(t, kube)
	for i := range 200 {
		if code := ledgerCall(h, "10.0.9.9:40000", "/ledger/v1/namespaces/team/balance", fmt.Sprintf("random-%d", i)); code == http.StatusOK {
			t.Fatalf("a made-up token was served")
		}
	}
	if reviews, _ := kube.counts(); reviews > failedReviewBurst+5 {
		t.Errorf("200 made-up tokens from one address cost %d TokenReviews; want at most a burst of %d", reviews, failedReviewBurst)
	}
	before, _ := kube.counts()
	if code := ledgerCall(h, "10.0.1.5:51000", "/ledger/v1/namespaces/team/balance", goodToken); code != http.StatusOK {
		t.Errorf("the replica's token, first sent while another address floods: %d, want 200", code)
	}
	if after, _ := kube.counts(); after != before+1 {
		t.Errorf("the replica's first request made %d TokenReviews, want 1", after-before)
	}
}

// Both sides of the limit, on a fake clock: 1. an address that sent failedReviewBurst made-up
// tokens gets no more reviews (503 not_ready, Retry-After: the REST apiserver's client
// retries); 2. a token the kube-apiserver accepted passes from that address too (a mesh's
// sidecar may make every caller one address); 3. a second later, one more review.
func TestTheReviewLimitKeepsAcceptedTokensAndRefills(t *testing.T) {
	kube := &reviewCounter{}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	h := newReviewedLedgerAt(t, kube, clk)
	const path = "/ledger/v1/namespaces/team/balance"
	for i := range failedReviewBurst {
		if code := ledgerCall(h, "10.0.9.9:1", path, fmt.Sprintf("random-%d", i)); code != http.StatusUnauthorized {
			t.Fatalf("made-up token %d within the burst: %d, want 401 (reviewed)", i, code)
		}
	}
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = "10.0.9.9:1"
	req.Header.Set("Authorization", "Bearer random-over")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body struct {
		Error struct{ Code, Reason string } `json:"error"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != http.StatusServiceUnavailable || body.Error.Code != "not_ready" || body.Error.Reason != "busy" || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a made-up token over the burst: %d %s, want 503 not_ready, reason busy (not an election), with Retry-After", rec.Code, rec.Body)
	}
	if reviews, _ := kube.counts(); reviews != failedReviewBurst {
		t.Errorf("%d TokenReviews, want %d", reviews, failedReviewBurst)
	}
	// The replica's token, accepted once from its own address, passes from the flooded one.
	if code := ledgerCall(h, "10.0.1.5:1", path, goodToken); code != http.StatusOK {
		t.Fatalf("the replica's token: %d, want 200", code)
	}
	if code := ledgerCall(h, "10.0.9.9:2", path, goodToken); code != http.StatusOK {
		t.Errorf("the replica's accepted token from the flooded address: %d, want 200", code)
	}
	clk.SetTime(clk.Now().Add(failedReviewEvery))
	before, _ := kube.counts()
	if code := ledgerCall(h, "10.0.9.9:1", path, "random-later"); code != http.StatusUnauthorized {
		t.Errorf("a made-up token a second later: %d, want 401 (reviewed)", code)
	}
	if code := ledgerCall(h, "10.0.9.9:1", path, "random-later-2"); code != http.StatusServiceUnavailable {
		t.Errorf("a second made-up token a second later: %d, want 503 (not reviewed)", code)
	}
	if after, _ := kube.counts(); after != before+1 {
		t.Errorf("a second later: %d TokenReviews, want 1", after-before)
	}
}

// Any pod's service account token is a valid token (the kube-apiserver
// accepts it), and the ledger then asks a SubjectAccessReview for the request's path; the
// authorizer's cache is keyed by the path, so a caller the ledger role does not name makes one
// SubjectAccessReview per new path. Input: from any pod that reaches the port (its mounted
// token), `curl -H "Authorization: Bearer $(cat /var/run/secrets/kubernetes.io/serviceaccount/token)"
// http://videogen-ledger:8084/ledger/v1/namespaces/$RANDOM/balance` in a loop (any path: the
// review comes before the ledger's 404). The token is reviewed once (cached), and the limit on
// tokens not accepted (TestRandomTokensDoNotEachCostATokenReview) does not apply (it is accepted). Measured before the fix: 200
// requests, 200 SubjectAccessReviews, each answered 403, on the manager's connection and flow
// (API Priority and Fairness throttles the manager's own writes with them). Want: a caller
// refused this way gets a burst of reviews, then about one a second; the rest are 403 without
// a review; the replica (allowed) is never limited.
func TestACallerNotAllowedDoesNotCostASubjectAccessReviewPerPath(t *testing.T) {
	const intruderToken = "another-pods-service-account-token"
	kube := &reviewCounter{also: map[string]string{intruderToken: "system:serviceaccount:team:default"}}
	h := newReviewedLedger(t, kube)
	for i := range 200 {
		if code := ledgerCall(h, "10.0.9.9:40000", fmt.Sprintf("/ledger/v1/namespaces/ns-%d/balance", i), intruderToken); code != http.StatusForbidden {
			t.Fatalf("a caller the ledger role does not name: %d, want 403", code)
		}
	}
	if _, access := kube.counts(); access > 20+5 {
		t.Errorf("200 requests of a caller not allowed, each on a new path, cost %d SubjectAccessReviews; want at most a burst of 20", access)
	}
	_, before := kube.counts()
	for i := range 30 {
		if code := ledgerCall(h, "10.0.1.5:51000", fmt.Sprintf("/ledger/v1/namespaces/ns-%d/balance", i), goodToken); code != http.StatusOK {
			t.Fatalf("the replica, namespace %d: %d, want 200", i, code)
		}
	}
	if _, after := kube.counts(); after != before+30 {
		t.Errorf("the replica's 30 paths: %d SubjectAccessReviews, want 30 (one each, never limited)", after-before)
	}
}

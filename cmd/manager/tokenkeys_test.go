package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// A new token's reviews are its verified subject's, not its
// address's, when it is a validly signed service account token (tokenKeys).

const testIssuer = "https://kubernetes.default.svc.cluster.local"

// testSigner is a service account issuer's signing key.
type testSigner struct {
	kid string
	key *ecdsa.PrivateKey
}

func newTestSigner(t *testing.T, kid string) testSigner {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return testSigner{kid: kid, key: key}
}

func (s testSigner) public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: &s.key.PublicKey, KeyID: s.kid, Algorithm: string(jose.ES256), Use: "sig"}
}

// token is a service account token of sub, signed by s, from issuer, expiring at exp (issued
// two hours before).
func (s testSigner) token(t *testing.T, issuer, sub string, exp time.Time) string {
	t.Helper()
	return s.tokenIssued(t, issuer, sub, exp.Add(-2*time.Hour), exp)
}

// tokenIssued is token, issued (and not before) at iat.
func (s testSigner) tokenIssued(t *testing.T, issuer, sub string, iat, exp time.Time) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: s.key, KeyID: s.kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: issuer, Subject: sub, Audience: jwt.Audience{issuer},
		IssuedAt: jwt.NewNumericDate(iat), NotBefore: jwt.NewNumericDate(iat), Expiry: jwt.NewNumericDate(exp)}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// issuerKube is reviewCounter that also serves the service account issuer's discovery (its
// issuer and public keys), or 403 for both while forbidden (the manager not allowed them).
type issuerKube struct {
	*reviewCounter
	mu        sync.Mutex
	keys      []jose.JSONWebKey
	forbidden bool
	fetches   int // times the keys were asked for (the discovery document first)
}

func (k *issuerKube) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/openid-configuration", "/openid/v1/jwks":
		k.mu.Lock()
		defer k.mu.Unlock()
		if r.URL.Path == "/.well-known/openid-configuration" {
			k.fetches++
		}
		if k.forbidden {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`, http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/openid/v1/jwks" {
			_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: k.keys})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": testIssuer, "jwks_uri": testIssuer + "/openid/v1/jwks"})
	default:
		k.reviewCounter.ServeHTTP(w, r)
	}
}

func (k *issuerKube) setKeys(keys ...jose.JSONWebKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = keys
}

func (k *issuerKube) keyFetches() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fetches
}

// issuerLedger is the ledger's authentication on clk before kube.
func issuerLedger(t *testing.T, kube http.Handler, clk *clocktesting.FakePassiveClock) http.Handler {
	t.Helper()
	srv := httptest.NewServer(kube)
	t.Cleanup(srv.Close)
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

const meshPath, meshHost = "/ledger/v1/namespaces/team/balance", "127.0.0.6"

// drain floods from the mesh's address until its reviews are spent.
func drain(h http.Handler, tokens func(i int) string) {
	for i := range failedReviewBurst + 5 {
		ledgerCall(h, meshHost+":1", meshPath, tokens(i))
	}
}

func madeUp(i int) string { return fmt.Sprintf("random-%d", i) }

// Checked, holds with the fix: a flooder cannot pass a made-up token off as validly signed,
// nor spend the replica's subject's reviews. Interleaving, on a fake clock: 1. the flooder,
// from the mesh's address, sends tokens that claim the replica's subject, the cluster's issuer
// and the cluster's key id, signed by a key of its own (anyone can make one); each is not
// verified, so spends the address's reviews (drained: 503) and none of the replica's; 2. the
// replica's new token (the kubelet rotated it), validly signed, from the same address: served
// at once. 3. one more forged token: still 503 (the address's, not the subject's, reviews).
func TestATokenSignedByAnotherKeySpendsItsAddresssReviews(t *testing.T) {
	cluster, forger := newTestSigner(t, "k1"), newTestSigner(t, "k1")
	clk := clocktesting.NewFakePassiveClock(time.Now())
	rotated := cluster.token(t, testIssuer, theReplica, clk.Now().Add(time.Hour))
	kube := &issuerKube{reviewCounter: &reviewCounter{also: map[string]string{rotated: theReplica}}, keys: []jose.JSONWebKey{cluster.public()}}
	h := issuerLedger(t, kube, clk)
	forged := func(i int) string {
		return forger.token(t, testIssuer, theReplica, clk.Now().Add(time.Hour+time.Duration(i)*time.Second))
	}
	for i := range failedReviewBurst + 5 {
		code := ledgerCall(h, meshHost+":1", meshPath, forged(i))
		if want := http.StatusUnauthorized; i >= failedReviewBurst {
			want = http.StatusServiceUnavailable
			if code != want {
				t.Fatalf("forged token %d, over the address's burst: %d, want %d (not reviewed)", i, code, want)
			}
		} else if code != want {
			t.Fatalf("forged token %d: %d, want %d (reviewed, refused)", i, code, want)
		}
	}
	if code := ledgerCall(h, meshHost+":2", meshPath, rotated); code != http.StatusOK {
		t.Errorf("the replica's validly signed token after a flood of forged ones claiming its subject: %d, want 200", code)
	}
	if code := ledgerCall(h, meshHost+":1", meshPath, forged(99)); code != http.StatusServiceUnavailable {
		t.Errorf("one more forged token from the drained address: %d, want 503", code)
	}
	// Signed by the cluster's key but naming another issuer: not the cluster's token either.
	if code := ledgerCall(h, meshHost+":1", meshPath, cluster.token(t, "https://elsewhere", theReplica, clk.Now().Add(time.Hour))); code != http.StatusServiceUnavailable {
		t.Errorf("a token of another issuer from the drained address: %d, want 503 (its address's reviews)", code)
	}
}

// Checked, holds with the fix: an expired token, validly signed, is not verified: it spends its
// address's reviews (503 from the drained address) and is refused by its review as before (401
// from another address). The clock is the manager's: the token expired an hour ago.
func TestAnExpiredSignedTokenIsRefusedAsBefore(t *testing.T) {
	cluster := newTestSigner(t, "k1")
	clk := clocktesting.NewFakePassiveClock(time.Now())
	expired := cluster.token(t, testIssuer, theReplica, clk.Now().Add(-time.Hour))
	kube := &issuerKube{reviewCounter: &reviewCounter{}, keys: []jose.JSONWebKey{cluster.public()}}
	h := issuerLedger(t, kube, clk)
	drain(h, madeUp)
	if code := ledgerCall(h, meshHost+":2", meshPath, expired); code != http.StatusServiceUnavailable {
		t.Errorf("an expired signed token from the drained address: %d, want 503 (its address's reviews)", code)
	}
	before, _ := kube.counts()
	if code := ledgerCall(h, "10.0.1.5:1", meshPath, expired); code != http.StatusUnauthorized {
		t.Errorf("an expired signed token from another address: %d, want 401", code)
	}
	if after, _ := kube.counts(); after != before+1 {
		t.Errorf("an expired signed token: %d TokenReviews, want 1 (the review stays the authority)", after-before)
	}
}

// Checked, holds with the fix: the issuer's keys rotated. Interleaving, on a fake clock: 1. the
// manager started with key k1; 2. the cluster's admin adds key k2 and signs with it; 3. a flood
// from the mesh's address drains it, its tokens naming a key id not known (each may ask for the
// keys again: at most one fetch per keysRefetchEvery); 4. 5 s later the replica's new token,
// signed by k2: the keys are fetched once, it is verified, reviewed and served.
func TestRotatedKeysAreFetchedOnceAndAccepted(t *testing.T) {
	k1, k2, bogus := newTestSigner(t, "k1"), newTestSigner(t, "k2"), newTestSigner(t, "k-unknown")
	clk := clocktesting.NewFakePassiveClock(time.Now())
	rotated := k2.token(t, testIssuer, theReplica, clk.Now().Add(time.Hour))
	kube := &issuerKube{reviewCounter: &reviewCounter{also: map[string]string{rotated: theReplica}}, keys: []jose.JSONWebKey{k1.public()}}
	h := issuerLedger(t, kube, clk)
	if n := kube.keyFetches(); n != 1 {
		t.Fatalf("%d fetches of the keys at start, want 1", n)
	}
	kube.setKeys(k1.public(), k2.public())
	drain(h, func(i int) string {
		return bogus.token(t, testIssuer, theReplica, clk.Now().Add(time.Hour+time.Duration(i)*time.Second))
	})
	if n := kube.keyFetches(); n != 1 {
		t.Errorf("%d fetches of the keys after a flood of unknown key ids within 5 s of the first, want 1", n)
	}
	clk.SetTime(clk.Now().Add(keysRefetchEvery))
	if code := ledgerCall(h, meshHost+":2", meshPath, rotated); code != http.StatusOK {
		t.Errorf("the replica's token signed by the new key, from the drained address: %d, want 200", code)
	}
	if n := kube.keyFetches(); n != 2 {
		t.Errorf("%d fetches of the keys, want 2 (the new key id fetched once)", n)
	}
	for s := range 3 {
		another := k2.token(t, testIssuer, theReplica, clk.Now().Add(time.Hour+time.Duration(s+1)*time.Second))
		kube.reviewCounter.mu.Lock()
		kube.also[another] = theReplica
		kube.reviewCounter.mu.Unlock()
		if code := ledgerCall(h, meshHost+":2", meshPath, another); code != http.StatusOK {
			t.Errorf("another token signed by the new key: %d, want 200", code)
		}
	}
	if n := kube.keyFetches(); n != 2 {
		t.Errorf("%d fetches of the keys, want 2 (a known key is not fetched again)", n)
	}
}

// Checked, holds with the fix: keys that cannot be fetched (the manager not allowed
// /openid/v1/jwks, or the kube-apiserver down at start) change nothing: a signed token spends
// its address's reviews as before the fix (503 from a drained address, reviewed and served from
// another), and made-up tokens are limited per address as before.
func TestKeysNotFetchableChangeNothing(t *testing.T) {
	cluster := newTestSigner(t, "k1")
	clk := clocktesting.NewFakePassiveClock(time.Now())
	rotated := cluster.token(t, testIssuer, theReplica, clk.Now().Add(time.Hour))
	kube := &issuerKube{reviewCounter: &reviewCounter{also: map[string]string{rotated: theReplica}}, keys: []jose.JSONWebKey{cluster.public()}, forbidden: true}
	h := issuerLedger(t, kube, clk)
	drain(h, madeUp)
	if reviews, _ := kube.counts(); reviews != failedReviewBurst {
		t.Errorf("a flood of made-up tokens: %d TokenReviews, want %d", reviews, failedReviewBurst)
	}
	// Long enough for the keys to be asked for again (and still refused), and for the flood to
	// take the reviews that refilled.
	clk.SetTime(clk.Now().Add(keysRefetchEvery))
	for i := range keysRefetchEvery / failedReviewEvery {
		if code := ledgerCall(h, meshHost+":1", meshPath, madeUp(100+int(i))); code != http.StatusUnauthorized {
			t.Errorf("a made-up token a refill later: %d, want 401", code)
		}
	}
	if code := ledgerCall(h, meshHost+":2", meshPath, rotated); code != http.StatusServiceUnavailable {
		t.Errorf("a signed token from the drained address, keys not known: %d, want 503 as before the fix", code)
	}
	if code := ledgerCall(h, "10.0.1.5:1", meshPath, rotated); code != http.StatusOK {
		t.Errorf("a signed token from another address, keys not known: %d, want 200", code)
	}
	if n := kube.keyFetches(); n != 2 {
		t.Errorf("the keys were asked for %d times, want 2 (at start, and once for the signed token %s later)", n, keysRefetchEvery)
	}
}

// Checked, holds with the fix: one pod's validly signed tokens are limited per subject. A pod
// whose account may request its own tokens (each a TokenRequest) sends 100 new ones, each from
// a new address: at most failedReviewBurst TokenReviews; the replica's new token is not limited
// by them.
func TestSignedTokensAreLimitedPerSubject(t *testing.T) {
	cluster := newTestSigner(t, "k1")
	clk := clocktesting.NewFakePassiveClock(time.Now())
	rotated := cluster.token(t, testIssuer, theReplica, clk.Now().Add(time.Hour))
	kube := &issuerKube{reviewCounter: &reviewCounter{also: map[string]string{rotated: theReplica}}, keys: []jose.JSONWebKey{cluster.public()}}
	h := issuerLedger(t, kube, clk)
	for i := range 100 {
		tok := cluster.token(t, testIssuer, "system:serviceaccount:team:default", clk.Now().Add(time.Hour+time.Duration(i)*time.Second))
		ledgerCall(h, fmt.Sprintf("10.0.%d.%d:1", i/200, i%200+1), meshPath, tok)
	}
	if reviews, _ := kube.counts(); reviews != failedReviewBurst {
		t.Errorf("100 signed tokens of one account from 100 addresses: %d TokenReviews, want %d", reviews, failedReviewBurst)
	}
	if code := ledgerCall(h, "10.0.0.1:2", meshPath, rotated); code != http.StatusOK {
		t.Errorf("the replica's new token from an address the flood used: %d, want 200", code)
	}
}

// Checked, holds with the fix: the manager's clock half a minute behind the kube-apiserver's (its
// node's clock drifts): the replica's token, just issued, looks issued in the future; it is
// still verified (a minute's leeway), so served from the drained address.
func TestATokenIssuedByAClockAheadIsVerified(t *testing.T) {
	cluster := newTestSigner(t, "k1")
	clk := clocktesting.NewFakePassiveClock(time.Now())
	rotated := cluster.tokenIssued(t, testIssuer, theReplica, clk.Now().Add(30*time.Second), clk.Now().Add(time.Hour))
	kube := &issuerKube{reviewCounter: &reviewCounter{also: map[string]string{rotated: theReplica}}, keys: []jose.JSONWebKey{cluster.public()}}
	h := issuerLedger(t, kube, clk)
	drain(h, madeUp)
	if code := ledgerCall(h, meshHost+":2", meshPath, rotated); code != http.StatusOK {
		t.Errorf("the replica's token issued 30 s ahead of the manager's clock, from the drained address: %d, want 200", code)
	}
}

// Checked, holds with the fix, against a real kube-apiserver (envtest: it signs service account
// tokens and serves its issuer's discovery): the interleaving of
// TestARotatedTokenIsNotLockedOutByAFloodFromItsAddress with real tokens. 1. the replica's token (a TokenRequest) is accepted from the mesh's
// address; 2. a flood of made-up tokens from that address drains its reviews; 3. the kubelet
// rotates the replica's token (a second TokenRequest); 4. its first request with the new token,
// from the drained address, is verified against the cluster's keys, reviewed and served. A
// token of another account, over that account's burst, is not reviewed (503).
func TestARealRotatedTokenIsServedUnderAFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Setenv(watchListEnv, "false") // as TestLedgerAuthRefusesAWrongTokenWith401AndNoErrorLine
	env, cfg, c, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx := context.Background()
	first := tokenFor(t, c, "videogen-apiserver", true)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	auth, err := ledgerAuthWithClock(cfg, hc, logr.Discard(), clk)
	if err != nil {
		t.Fatal(err)
	}
	h := auth(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	if code := ledgerCall(h, meshHost+":2", meshPath, first); code != http.StatusOK {
		t.Fatalf("the replica's token: %d, want 200", code)
	}
	drain(h, madeUp)
	if code := ledgerCall(h, meshHost+":1", meshPath, madeUp(100)); code != http.StatusServiceUnavailable {
		t.Fatalf("a made-up token from the drained address: %d, want 503", code)
	}
	newToken := func(name string) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "videogen-system", Name: name}}
		req := &authenticationv1.TokenRequest{}
		if err := c.SubResource("token").Create(ctx, sa, req); err != nil {
			t.Fatal(err)
		}
		return req.Status.Token
	}
	if code := ledgerCall(h, meshHost+":2", meshPath, newToken("videogen-apiserver")); code != http.StatusOK {
		t.Errorf("the replica's rotated token from the drained address: %d, want 200", code)
	}
	_ = tokenFor(t, c, "intruder", false)
	for i := range failedReviewBurst {
		if code := ledgerCall(h, fmt.Sprintf("10.0.0.%d:1", i+1), meshPath, newToken("intruder")); code != http.StatusForbidden {
			t.Fatalf("another account's token %d within its burst: %d, want 403", i, code)
		}
	}
	if code := ledgerCall(h, "10.0.1.1:1", meshPath, newToken("intruder")); code != http.StatusServiceUnavailable {
		t.Errorf("another account's token over its burst, from a new address: %d, want 503 (not reviewed)", code)
	}
}

// Found reviewing the fix above (a regression it would have brought; fixed: a signed token
// spends its account's review once, not once per request while its review is on its way or
// its result is cached). The REST replicas share one service account; without a mesh each
// pod has its own address, and before the fix each replica's new token spent its own
// address's reviews. With the fix, all replicas' new tokens spend the account's 20. Interleaving:
// a manager is elected; every one of 20 replicas has 10 customer requests in flight, all with
// its token new to this manager, all arriving before the first TokenReview comes back (the
// token cache makes one review per token of them; the others wait for it). Had each request
// spent one: the first two replicas' 20 requests take the burst, the other 18 replicas' are
// 503, retried every second, one replica's token reviewed per second: 3 replicas still not
// served after the client's 15 s, and their customers' requests (POST /v1/tasks, GET
// /v1/balance) fail after every failover. Want: each token spends one review; all 20 served.
func TestReplicasSharingAnAccountAreNotLockedOutAfterAFailover(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	f := newReviewLimiter(clk)
	const replicas, inFlight = 20, 10
	served := map[int]bool{}
	for s := 0; s <= 15 && len(served) < replicas; s++ {
		for r := range replicas {
			if served[r] {
				continue
			}
			token := fmt.Sprintf("replica-%d-token", r)
			for range inFlight {
				if f.allow(fmt.Sprintf("10.0.0.%d", r+1), theReplica, true, token) {
					served[r] = true
				}
			}
		}
		for r := range served { // reviewed: accepted, in use from now on
			f.accepted(fmt.Sprintf("replica-%d-token", r))
		}
		clk.SetTime(clk.Now().Add(failedReviewEvery))
	}
	if len(served) < replicas {
		t.Errorf("%d of %d replicas' new tokens reviewed within 15 s after a failover, want all", len(served), replicas)
	}
}

// downKube is issuerKube whose TokenReviews fail (403: the manager may not create them, as
// while an admin's RBAC change is being put right) while down is set.
type downKube struct {
	*issuerKube
	down bool
	mu   sync.Mutex
}

func (k *downKube) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	down := k.down
	k.mu.Unlock()
	if down && r.URL.Path == "/apis/authentication.k8s.io/v1/tokenreviews" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`)
		return
	}
	k.issuerKube.ServeHTTP(w, r)
}

// Found reviewing the fix above (fixed: a signed token whose review could not be made keeps its
// spent review): 20 REST replicas (one account) send their new tokens (a failover) while the
// manager's TokenReviews fail for 30 s; each replica retries every second. Had a failed review
// given the token's spent review back to be spent again, their retries would drain the
// account's 20 in a second, and once the reviews work again the replicas' tokens would be
// reviewed one a second: the last one 20 s after the outage, past its client's 15 s, its
// customers refused for longer than the outage. Before the fix each replica (its own address,
// no mesh) had its own 20. Want: every replica served within 2 s of the reviews working again.
func TestReplicasAreServedAtOnceWhenReviewsWorkAgain(t *testing.T) {
	cluster := newTestSigner(t, "k1")
	clk := clocktesting.NewFakePassiveClock(time.Now())
	const replicas = 20
	tokens := map[int]string{}
	kube := &downKube{issuerKube: &issuerKube{reviewCounter: &reviewCounter{also: map[string]string{}}, keys: []jose.JSONWebKey{cluster.public()}}, down: true}
	for r := range replicas {
		tokens[r] = cluster.token(t, testIssuer, theReplica, clk.Now().Add(time.Hour+time.Duration(r)*time.Second))
		kube.also[tokens[r]] = theReplica
	}
	h := issuerLedger(t, kube, clk)
	served := map[int]bool{}
	round := func() {
		for r := range replicas {
			if !served[r] && ledgerCall(h, fmt.Sprintf("10.0.0.%d:1", r+1), meshPath, tokens[r]) == http.StatusOK {
				served[r] = true
			}
		}
		clk.SetTime(clk.Now().Add(failedReviewEvery))
	}
	for range 30 {
		round()
	}
	kube.mu.Lock()
	kube.down = false
	kube.mu.Unlock()
	for range 2 {
		round()
	}
	if len(served) != replicas {
		t.Errorf("%d of %d replicas served 2 s after a 30 s outage of the reviews, want all", len(served), replicas)
	}
}

package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// The ledger port's review limits: a token in use, X-Forwarded-For, bounded limiters and
// concurrent refused calls.

// Fixed (accepted moves the entry on): a token the kube-apiserver accepted passed the per-address limit
// for acceptedTokenTTL (10 minutes) from its FIRST acceptance, however often it was used and
// accepted again since (accepted returned early while the entry was live, and never moved it
// on). ledgerAuth's comment promises that a caller sharing its address with a flooder, "as
// behind a mesh's sidecar" (Istio delivers every inbound connection from 127.0.0.6), "cannot
// lock it out". Interleaving, on a fake clock: 1. the REST replica's token (projected, valid
// for about an hour) is accepted at T; the replica calls the ledger all the time; 2. anyone in
// the mesh sends made-up tokens to the port, draining the shared address's reviews (20, then
// one a second: each a 503 or 401, cheap to send); 3. at T+10m+1s the replica's next call,
// same token, still valid, accepted a minute ago: it spends a review from the drained address
// and is refused 503 not_ready. The replica's client retries for 15 s against a bucket the
// flooder empties every second: customers' POST /v1/tasks and GET /v1/balance answer 503 (a
// customer who can pay is refused) every 10 minutes, for as long as the flood goes on. Want:
// a token in use stays accepted (the 10 minutes run from its last acceptance).
func TestATokenInUseIsNotLockedOutByAFloodFromItsAddress(t *testing.T) {
	kube := &reviewCounter{}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	h := newReviewedLedgerAt(t, kube, clk)
	const path, mesh = "/ledger/v1/namespaces/team/balance", "127.0.0.6"
	start := clk.Now()
	flood := func(round int) {
		for i := range failedReviewBurst + 5 {
			ledgerCall(h, mesh+":1", path, fmt.Sprintf("random-%d-%d", round, i))
		}
	}
	if code := ledgerCall(h, mesh+":2", path, goodToken); code != http.StatusOK {
		t.Fatalf("the replica's first call: %d, want 200", code)
	}
	// The replica calls every 30 s for 11 minutes; the flood has drained the address just
	// before each call.
	for step := 0; clk.Now().Before(start.Add(11 * time.Minute)); step++ {
		clk.SetTime(clk.Now().Add(30 * time.Second))
		flood(step)
		if code := ledgerCall(h, mesh+":2", path, goodToken); code != http.StatusOK {
			t.Fatalf("the replica's token, in use since %v ago and accepted again since, from the mesh's address under a flood: %d, want 200",
				clk.Now().Sub(start), code)
		}
	}
}

// Checked, holds (a pin): the per-address limit keys on the connection's address only. A
// flooder that sends X-Forwarded-For (or X-Real-IP) with a new address each time gets no new
// reviews: 200 made-up tokens, each "from" another forwarded address, cost a burst.
func TestForwardedForIsNotTrusted(t *testing.T) {
	kube := &reviewCounter{}
	h := newReviewedLedger(t, kube)
	for i := range 200 {
		req := httptest.NewRequest(http.MethodGet, "/ledger/v1/namespaces/team/balance", nil)
		req.RemoteAddr = "10.0.9.9:40000"
		req.Header.Set("Authorization", fmt.Sprintf("Bearer random-%d", i))
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.1.%d.%d", i/250, i%250))
		req.Header.Set("X-Real-IP", fmt.Sprintf("10.2.%d.%d", i/250, i%250))
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if reviews, _ := kube.counts(); reviews > failedReviewBurst {
		t.Errorf("200 made-up tokens with forwarded addresses cost %d TokenReviews, want at most %d", reviews, failedReviewBurst)
	}
}

// Checked, holds (a pin): the per-address limiters are bounded. 5000 addresses (an IPv6
// range, or many pods) each sending a made-up token leave at most maxLimitedHosts limiters;
// once they have been idle a burst's time (their buckets full again), a new address is
// reviewed again.
func TestTheAddressLimitersAreBounded(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	f := newReviewLimiter(clk)
	for i := range 5000 {
		f.allow(fmt.Sprintf("fd00::%x", i), "", false, "")
	}
	if n := len(f.hosts); n > maxLimitedHosts {
		t.Errorf("%d address limiters after 5000 addresses, want at most %d", n, maxLimitedHosts)
	}
	clk.SetTime(clk.Now().Add(failedReviewBurst * failedReviewEvery))
	if !f.allow("10.0.1.5", "", false, "") {
		t.Error("a new address, once the flood's limiters are idle: refused, want reviewed")
	}
	if n := len(f.hosts); n > maxLimitedHosts {
		t.Errorf("%d address limiters, want at most %d", n, maxLimitedHosts)
	}
}

// barrierKube is reviewCounter whose SubjectAccessReviews wait until release is closed.
type barrierKube struct {
	*reviewCounter
	arrived chan struct{}
	release chan struct{}
}

func (k *barrierKube) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/apis/authorization.k8s.io/v1/subjectaccessreviews" {
		k.arrived <- struct{}{}
		<-k.release
	}
	k.reviewCounter.ServeHTTP(w, r)
}

// Fixed (denialLimiter.allow spends before the review): the per-user limit on SubjectAccessReviews of a refused caller
// (6b1551b, TestACallerNotAllowedDoesNotCostASubjectAccessReviewPerPath) looks at the bucket before the review (allow: one left?) and spends only
// after the refusal came back (denied): every request that arrives while the reviews are on
// their way sees the same token left, so concurrent requests all pass. The limit on tokens
// (reviewLimiter) spends before the review for exactly this reason; this one does not.
// Interleaving (a fake clock; the kube-apiserver holds the reviews until all have arrived, as
// a loaded one does): 1. a pod's service account (any pod: its token is valid) is refused 20
// times (its burst); 2. a second later it has one review left; 3. it sends 30 requests at once,
// each on a new path (the authorizer's cache is per path). Before the fix: all 30 reach the
// kube-apiserver as SubjectAccessReviews, and so every second: the limit holds only for a
// caller that sends one request at a time (curl in a loop), not for `xargs -P 100 curl`.
// Want: one review, the other 29 refused without one.
func TestConcurrentRefusedCallsDoNotEachCostAReview(t *testing.T) {
	const intruderToken = "another-pods-service-account-token"
	kube := &barrierKube{reviewCounter: &reviewCounter{also: map[string]string{intruderToken: "system:serviceaccount:team:default"}},
		arrived: make(chan struct{}, 100), release: make(chan struct{})}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	h := newReviewedLedgerAt(t, kube, clk)
	go func() { // the first 20, one at a time
		for range failedReviewBurst {
			<-kube.arrived
			kube.release <- struct{}{}
		}
	}()
	for i := range failedReviewBurst {
		if code := ledgerCall(h, "10.0.9.9:1", fmt.Sprintf("/ledger/v1/namespaces/a-%d/balance", i), intruderToken); code != http.StatusForbidden {
			t.Fatalf("refusal %d: %d, want 403", i, code)
		}
	}
	clk.SetTime(clk.Now().Add(failedReviewEvery))
	_, before := kube.counts()
	const n = 30
	done := make(chan int, n)
	for i := range n {
		go func() {
			done <- ledgerCall(h, "10.0.9.9:1", fmt.Sprintf("/ledger/v1/namespaces/b-%d/balance", i), intruderToken)
		}()
	}
	// Every request either reached the kube-apiserver (held there) or was answered.
	reached, answered := 0, 0
	for reached+answered < n {
		select {
		case <-kube.arrived:
			reached++
		case code := <-done:
			if code != http.StatusForbidden {
				t.Errorf("a refused caller: %d, want 403", code)
			}
			answered++
		}
	}
	close(kube.release)
	for range reached {
		<-done
	}
	if _, after := kube.counts(); after-before > 1 || reached > 1 {
		t.Errorf("30 concurrent requests of a refused caller with one review left cost %d SubjectAccessReviews, want 1", after-before)
	}
}

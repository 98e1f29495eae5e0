package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The ledger's port sent a token of any length to the kube-apiserver.
//
// Input: a call to the ledger's port (anyone in the cluster who reaches it: the port is a
// ClusterIP Service, and with --ledger-secure it relies on the review alone) with
// "Authorization: Bearer <~1 MiB of random characters>". Step by step: 1. net/http reads
// headers up to its default MaxHeaderBytes (1 MiB + 4 KiB slack; serveLedger sets none), so the
// request reaches ledgerAuth; 2. the token cache (keyed by the token's hash) has never seen it;
// 3. ledgerAuth POSTs a TokenReview carrying the whole token to the kube-apiserver, whose body
// limit is 3 MiB, and which passes it to every token authenticator it has (a token webhook
// included). Measured below: the review the kube-apiserver receives is as long as the header
// sent. A new random token per request defeats the cache: each request is 1 MiB to the
// kube-apiserver, the manager's one connection to it shared with the controllers and the
// ledger's own writes. No token the project accepts is longer than a service account JWT (a
// kilobyte or two).
//
// Want: a token longer than bearer.MaxTokenBytes is a 400 invalid_request (malformed, as two
// Authorization headers are), and no review is made; a token at the cap is still reviewed.
func TestAnOversizedBearerTokenIsNotSentToTheKubeAPIServer(t *testing.T) {
	var mu sync.Mutex
	var reviewBytes []int
	kube := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/apis/authentication.k8s.io/v1/tokenreviews" {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		reviewBytes = append(reviewBytes, len(body))
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(authnv1.TokenReview{TypeMeta: metav1.TypeMeta{Kind: "TokenReview", APIVersion: "authentication.k8s.io/v1"}})
	}))
	defer kube.Close()
	cfg := &rest.Config{Host: kube.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := ledgerAuth(cfg, hc, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	// The ledger's server as serveLedger builds it: net/http's default header limit.
	manager := httptest.NewServer(auth(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("an unauthenticated caller was served")
	})))
	defer manager.Close()

	call := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, manager.URL+"/ledger/v1/namespaces/team/balance", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Error.Code
	}

	huge := strings.Repeat("x", 1<<20-1024) // within net/http's header limit
	if status, code := call(huge); status != http.StatusBadRequest || code != "invalid_request" {
		t.Errorf("a %d-byte bearer token: %d %q; want 400 invalid_request", len(huge), status, code)
	}
	mu.Lock()
	if len(reviewBytes) != 0 {
		t.Errorf("a %d-byte bearer token was sent for review: TokenReview bodies of %v bytes; want none", len(huge), reviewBytes)
	}
	reviewBytes = nil
	mu.Unlock()

	// Checked, holds: a token at the cap (far longer than any service account token) is reviewed
	// and, not accepted, is a 401.
	if status, code := call(strings.Repeat("y", 16<<10)); status != http.StatusUnauthorized || code != "unauthorized" {
		t.Errorf("a 16 KiB bearer token: %d %q; want 401 unauthorized (reviewed, not accepted)", status, code)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reviewBytes) != 1 {
		t.Errorf("a 16 KiB bearer token: %d reviews; want 1", len(reviewBytes))
	}
}

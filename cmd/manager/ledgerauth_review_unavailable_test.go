package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// The ledger's authentication answers a caller
// whose TokenReview could not be made (the kube-apiserver answered 503 for a moment: a restart,
// an overload) 500 internal_error. The REST apiserver's ledger Client retries only not_ready
// and unanswered calls; a 500 is a plain error at once, and the replica answers its client 500
// "internal error" for a submission that changed nothing and would have gone through a second
// later, within the 15 s a ledger call may take (docs/api.md: a failover of a few seconds shows
// as slow calls, not failed ones). A new manager's token cache is empty, so right after a
// failover, when the kube-apiserver is busiest, every replica's first call needs a review.
//
// Interleaving: 1. a replica's Client asks the ledger for a balance; 2. the manager's
// TokenReview is answered 503 (no Retry-After) by the kube-apiserver; 3. the kube-apiserver
// answers again. Want: the call succeeds on a retry (not_ready, Retry-After), nothing was done
// by the refused attempt.
func TestALedgerCallerWhoseReviewCouldNotBeMadeIsAskedToRetry(t *testing.T) {
	var reviews atomic.Int32
	kube := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			if reviews.Add(1) == 1 { // step 2
				w.WriteHeader(http.StatusServiceUnavailable)
				_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
					Status: metav1.StatusFailure, Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
					Message: "the kube-apiserver is restarting"})
				return
			}
			_ = json.NewEncoder(w).Encode(authnv1.TokenReview{TypeMeta: metav1.TypeMeta{Kind: "TokenReview", APIVersion: "authentication.k8s.io/v1"},
				Status: authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "system:serviceaccount:videogen-system:apiserver"}}})
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			_ = json.NewEncoder(w).Encode(authzv1.SubjectAccessReview{TypeMeta: metav1.TypeMeta{Kind: "SubjectAccessReview", APIVersion: "authorization.k8s.io/v1"},
				Status: authzv1.SubjectAccessReviewStatus{Allowed: true}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer kube.Close()
	cfg := &rest.Config{Host: kube.URL}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := ledgerAuth(cfg, hc, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	manager := httptest.NewServer(auth(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"balance":100,"frozen":0,"spent":0,"credited":100,"holds":0}`)
	})))
	defer manager.Close()

	tokenFile := t.TempDir() + "/token"
	if err := writeFile(tokenFile, "a-service-account-token"); err != nil {
		t.Fatal(err)
	}
	c := &ledger.Client{URL: manager.URL, TokenFile: tokenFile, Deadline: 10 * time.Second,
		Backoff: wait.Backoff{Duration: 20 * time.Millisecond, Factor: 1, Steps: 20}}
	f, err := c.Balance(context.Background(), "team")
	if err != nil || f.Balance != 100 {
		t.Fatalf("a balance read whose first TokenReview the kube-apiserver could not make: %+v, %v;\n"+
			"want it read on a retry (a 500 is the REST apiserver's \"internal error\" for a call that changed nothing)", f, err)
	}
}

func writeFile(path, content string) error {
	return os.WriteFile(path, []byte(content), 0o600)
}

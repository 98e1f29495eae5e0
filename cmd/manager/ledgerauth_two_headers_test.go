package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The ledger's authentication read only the first of two Authorization
// headers.
//
// Input: a call to the ledger's port (anyone in the cluster who reaches it) with two
// Authorization headers, e.g. a REST replica behind a sidecar or proxy that adds its own, or a
// caller sending two service accounts' tokens. Step by step: 1. the request reaches ledgerAuth;
// 2. the first header's token is reviewed (TokenReview, SubjectAccessReview) and the call is
// served as that account, the second ignored; or, the other way round, the caller whose second
// header holds the allowed token is told 401 "the token is not valid".
//
// Want: as the REST API (RFC 6750 §3.1), a 400 invalid_request in the ledger's error shape,
// and no review made of either token (nothing to ask the kube-apiserver about).
func TestTwoAuthorizationHeadersAreA400ForTheLedger(t *testing.T) {
	var mu sync.Mutex
	var reviewed []string
	kube := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var review authnv1.TokenReview
			_ = json.NewDecoder(r.Body).Decode(&review)
			mu.Lock()
			reviewed = append(reviewed, review.Spec.Token)
			mu.Unlock()
			ok := review.Spec.Token == "allowed-token"
			_ = json.NewEncoder(w).Encode(authnv1.TokenReview{TypeMeta: metav1.TypeMeta{Kind: "TokenReview", APIVersion: "authentication.k8s.io/v1"},
				Status: authnv1.TokenReviewStatus{Authenticated: ok, User: authnv1.UserInfo{Username: "system:serviceaccount:videogen-system:apiserver"}}})
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			_ = json.NewEncoder(w).Encode(authzv1.SubjectAccessReview{TypeMeta: metav1.TypeMeta{Kind: "SubjectAccessReview", APIVersion: "authorization.k8s.io/v1"},
				Status: authzv1.SubjectAccessReviewStatus{Allowed: true}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer kube.Close()
	cfg := &rest.Config{Host: kube.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}} // the fake reads JSON
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := ledgerAuth(cfg, hc, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	served := 0
	manager := httptest.NewServer(auth(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served++
		_, _ = io.WriteString(w, `{}`)
	})))
	defer manager.Close()

	for _, headers := range [][]string{{"Bearer allowed-token", "Bearer other-token"}, {"Bearer other-token", "Bearer allowed-token"}} {
		req, _ := http.NewRequest(http.MethodGet, manager.URL+"/ledger/v1/namespaces/team/balance", nil)
		for _, h := range headers {
			req.Header.Add("Authorization", h)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || body.Error.Code != "invalid_request" {
			t.Errorf("Authorization headers %q: %d %q; want 400 invalid_request", headers, resp.StatusCode, body.Error.Code)
		}
	}
	if served != 0 || len(reviewed) != 0 {
		t.Errorf("served %d calls, reviewed tokens %q; want none", served, reviewed)
	}
}

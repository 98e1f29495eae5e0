package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// Anyone who reaches the ledger's port may send a made-up token. That is a 401 in the ledger's
// error shape and no error line; it was a 500 "Authentication failed" with an error and a stack
// trace in the manager's log for every such request. A caller the kube-apiserver knows but the
// ledger role does not name is a 403; the REST apiserver's account gets through.
func TestLedgerAuthRefusesAWrongTokenWith401AndNoErrorLine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	// client-go reads its feature gates once per process, at the first client: set them as the
	// manager does (preferPagedLists), so TestPreferPagedListsTurnsWatchListOff still holds.
	t.Setenv(watchListEnv, "false")
	env, cfg, c, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx := context.Background()

	allowed, other := tokenFor(t, c, "ledger-client", true), tokenFor(t, c, "intruder", false)

	var logged bytes.Buffer
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := ledgerAuth(cfg, hc, quietWhenCallerGaveUp(zap.New(zap.WriteTo(&logged), zap.Level(zapcore.InfoLevel))))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(auth(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ledger") })))
	defer srv.Close()

	for _, c := range []struct {
		name, header string
		status       int
		code         string
	}{
		{"no token", "", http.StatusUnauthorized, "unauthorized"},
		{"not a bearer token", "Basic YTpi", http.StatusUnauthorized, "unauthorized"},
		{"a made-up token", "Bearer x", http.StatusUnauthorized, "unauthorized"},
		{"a token of another cluster's form", "Bearer " + strings.Repeat("e", 900), http.StatusUnauthorized, "unauthorized"},
		{"an account without the ledger role", "Bearer " + other, http.StatusForbidden, "forbidden"},
		{"the ledger's client", "bearer " + allowed, http.StatusOK, ""},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/ledger/v1/namespaces/team/balance", nil)
		if c.header != "" {
			req.Header.Set("Authorization", c.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d (%s), want %d", c.name, resp.StatusCode, body, c.status)
			continue
		}
		if c.code == "" {
			continue
		}
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(body, &e) != nil || e.Error.Code != c.code || e.Error.Message == "" {
			t.Errorf("%s: body %q, want {\"error\":{\"code\":%q,…}}", c.name, body, c.code)
		}
	}
	// The manager's /metrics (--metrics-secure) takes the same filter.
	filter, err := reviewedCallers(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := filter(zap.New(zap.WriteTo(&logged), zap.Level(zapcore.InfoLevel)), http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]int{"x": http.StatusUnauthorized, other: http.StatusForbidden} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		metrics.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("/metrics with token %.8s…: status %d (%s), want %d", token, rec.Code, rec.Body, want)
		}
	}
	if strings.Contains(logged.String(), `"level":"error"`) {
		t.Errorf("refused callers were logged as errors:\n%s", logged.String())
	}
}

// tokenFor makes a service account in videogen-system, allowed the ledger if allow, and returns
// a token for it.
func tokenFor(t *testing.T, c client.Client, name string, allow bool) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "videogen-system"}}
	_ = c.Create(ctx, ns)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name}}
	if err := c.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	if allow {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/ledger/v1/*"}, Verbs: []string{"get", "post"}}}}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns.Name, Name: name}}}
		for _, o := range []client.Object{role, binding} {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	req := &authenticationv1.TokenRequest{}
	if err := c.SubResource("token").Create(ctx, sa, req); err != nil {
		t.Fatal(err)
	}
	return req.Status.Token
}

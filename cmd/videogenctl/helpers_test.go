package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

func namespace(m *metav1.ObjectMeta) *corev1.Namespace { return &corev1.Namespace{ObjectMeta: *m} }

// kubeProxy is a TLS proxy in front of env's kube-apiserver, for tests that play an interleaving
// on the CLI's requests: handle answers each request, given proxy, which passes it on to the
// kube-apiserver (a handler that does not answer it itself calls proxy.ServeHTTP). It returns
// the flags that point the CLI at it.
func kubeProxy(t *testing.T, env *envtest.Environment, handle func(w http.ResponseWriter, r *http.Request, proxy http.Handler)) []string {
	t.Helper()
	target, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handle(w, r, proxy) }))
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--server", srv.URL, "--insecure-skip-tls-verify", "--kubeconfig", kubeconfig}
}

// cliWith runs videogenctl with the kubeconfig at path, and returns what it printed.
func cliWith(ctx context.Context, path string) func(args ...string) (string, error) {
	return func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, "--kubeconfig", path), &out)
		return out.String(), err
	}
}

package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Kubernetes' namespaces and the operator's own are refused before the cluster is asked: an
// account there would put its users next to the API key Secrets or the control plane.
func TestAccountCreateRefusesSystemNamespaces(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there: reaching the cluster would fail with "refused"
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--server", "https://" + addr, "--insecure-skip-tls-verify", "--kubeconfig", kubeconfig}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"account", "create", "kube-system"}, `"kube-system" cannot be an account: kube-* namespaces belong to Kubernetes`},
		{[]string{"account", "create", "kube-public"}, `"kube-public" cannot be an account: kube-* namespaces belong to Kubernetes`},
		{[]string{"account", "create", "videogen-system"}, `"videogen-system" cannot be an account: it is the operator's namespace (--key-namespace)`},
		{[]string{"account", "create", "ops", "--key-namespace", "ops"}, `"ops" cannot be an account: it is the operator's namespace (--key-namespace)`},
		// Only the namespace the operator runs in is its own: another name goes to the cluster.
		{[]string{"account", "create", "videogen-system", "--key-namespace", "ops"}, "was refused"},
		{[]string{"account", "create", "kubeflow"}, "was refused"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append(tc.args, flags...), &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

package manifests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// `make undeploy` (hack/undeploy.sh) removes the CRDs and with them every videogen object, as
// docs/deploy.md says, although accounts and top-ups carry the ledger's finalizer and running
// tasks theirs, and the manager that would take them off goes in the same delete: a plain
// `kubectl delete -f` left the CRDs Terminating and waited for ever. The control plane runs no
// manager, as after the delete; nor a namespace controller, so videogen-system stays
// Terminating here, which the script does not wait for.
func TestUndeployRemovesTheCRDsWithTheirObjects(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	kustomize := filepath.Join(root, "bin", "kustomize")
	if _, err := os.Stat(kustomize); err != nil {
		t.Skip("bin/kustomize is missing (make verify-manifests builds it)")
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH")
	}
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	env.CRDDirectoryPaths = nil // the deploy brings them
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigFile := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigFile, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	// Longer than the script gives the CRDs (2 minutes), so that its own account of what is left shows.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sh := func(stdin, script string) (string, error) {
		cmd := exec.CommandContext(ctx, "bash", "-c", script)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfigFile, "KUBECTL="+kubectl, "KUSTOMIZE="+kustomize)
		cmd.Stdin = strings.NewReader(stdin)
		// On the deadline end the script's kubectl too, which would hold its output open.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(stdin, script string) {
		t.Helper()
		if out, err := sh(stdin, script); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	must("", `"$KUSTOMIZE" build config/default | "$KUBECTL" apply --server-side -f - >/dev/null &&
		"$KUBECTL" wait --for=condition=Established crd --all >/dev/null`)
	// What the manager puts on: the ledger's finalizer on an account and a top-up, the
	// cancel-work finalizer on a task whose stage runs (the latter two added after the create,
	// as the manager does: the policies refuse a create that carries them, an export's copy).
	must(`apiVersion: v1
kind: Namespace
metadata: {name: acme}
---
apiVersion: videogen.dev/v1alpha1
kind: PointAccount
metadata: {name: default, namespace: acme, finalizers: [videogen.dev/ledger]}
spec: {}
---
apiVersion: videogen.dev/v1alpha1
kind: PointTopUp
metadata: {name: inv-1, namespace: acme}
spec: {amount: 1000, reference: INV-1}
---
apiVersion: videogen.dev/v1alpha1
kind: VideoTask
metadata: {name: first-short, namespace: acme}
spec: {capability: video.short, templateRef: beach-dance, inputs: {faceImageURL: "https://media.example.com/face.jpg"}}
`, `"$KUBECTL" apply -f - >/dev/null &&
		"$KUBECTL" -n acme patch pointtopup inv-1 --type=merge -p '{"metadata":{"finalizers":["videogen.dev/ledger"]}}' >/dev/null &&
		"$KUBECTL" -n acme patch videotask first-short --type=merge -p '{"metadata":{"finalizers":["videogen.dev/cancel-work"]}}' >/dev/null`)

	start := time.Now()
	out, err := sh("", "hack/undeploy.sh config/default")
	if err != nil {
		t.Fatalf("hack/undeploy.sh after %s: %v\n%s", time.Since(start).Round(time.Second), err, out)
	}
	left, err := sh("", `"$KUBECTL" get crd -o name | grep videogen.dev || true`)
	if err != nil || strings.TrimSpace(left) != "" {
		t.Errorf("CRDs left after hack/undeploy.sh (%v):\n%s", err, left)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/videogen-dev/videogen-operator/apikeys"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
	"github.com/videogen-dev/videogen-operator/ledger"
)

// TestAdministratorWorkflow drives the CLI against a real kube-apiserver with the top-up
// controller running: create an account, issue, list and revoke keys, top up, show.
func TestAdministratorWorkflow(t *testing.T) {
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	mustCreateNamespace(t, ctx, c, "videogen-system")
	startTopUpController(t, ctx, env)

	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, "--kubeconfig", path), &out)
		return out.String(), err
	}

	if out, err := cli("account", "create", "acme", "--description", "ACME Corp"); err != nil || !strings.Contains(out, `account "acme" created`) {
		t.Fatalf("account create: %v\n%s", err, out)
	}
	if _, err := cli("account", "create", "acme"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second account create: %v", err)
	}
	if _, err := cli("apikey", "create", "--account", "nobody"); err == nil || !strings.Contains(err.Error(), `no account "nobody"`) {
		t.Fatalf("key for a missing account: %v", err)
	}

	out, err := cli("apikey", "create", "--account", "acme", "--description", "ci", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var issued map[string]string
	if err := json.Unmarshal([]byte(out), &issued); err != nil {
		t.Fatalf("apikey create -o json: %v\n%s", err, out)
	}
	auth := &apikeys.Authenticator{Reader: c, Namespace: "videogen-system"}
	p, err := auth.Authenticate(ctx, issued["key"])
	if err != nil || p.Account != "acme" {
		t.Fatalf("issued key does not authenticate: %+v %v", p, err)
	}
	if out, _ := cli("apikey", "list"); !regexp.MustCompile(issued["id"] + `\s+acme\s+.*ci`).MatchString(out) {
		t.Fatalf("apikey list:\n%s", out)
	}

	out, err = cli("topup", "acme", "500", "--reference", "INV-1")
	if err != nil || !strings.Contains(out, "balance is now 500") {
		t.Fatalf("topup: %v\n%s", err, out)
	}
	if _, err := cli("topup", "acme", "-5", "--reference", "INV-2"); err == nil {
		t.Fatal("a negative top-up was accepted")
	}
	if _, err := cli("topup", "acme", "5"); err == nil {
		t.Fatal("a top-up without a reference was accepted")
	}
	out, err = cli("account", "show", "acme", "-o", "yaml")
	if err != nil || !strings.Contains(out, "balance: 500") || !strings.Contains(out, "reference: INV-1") {
		t.Fatalf("account show: %v\n%s", err, out)
	}

	if _, err := cli("apikey", "revoke", issued["id"]); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Authenticate(ctx, issued["key"]); err == nil {
		t.Fatal("a revoked key still authenticates")
	}
	if _, err := cli("apikey", "revoke", issued["id"]); err == nil {
		t.Fatal("revoking twice did not say the key is unknown")
	}
}

func mustCreateNamespace(t *testing.T, ctx context.Context, c client.Client, name string) {
	t.Helper()
	if err := c.Create(ctx, namespace(&metav1.ObjectMeta{Name: name})); err != nil {
		t.Fatal(err)
	}
}

func startTopUpController(t *testing.T, ctx context.Context, env *envtest.Environment) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	r := &controllers.PointTopUpReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Ledger: ledger.New(mgr.GetClient(), mgr.GetAPIReader()), Recorder: events.NewFakeRecorder(10)}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
}

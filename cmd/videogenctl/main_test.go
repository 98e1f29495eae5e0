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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
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

	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-listed"},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
			Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}
	if err := c.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	out, err = cli("tasks", "--account", "acme")
	if err != nil || !regexp.MustCompile(`acme\s+vt-listed\s+video.eraser\s+queued`).MatchString(out) {
		t.Fatalf("tasks: %v\n%s", err, out)
	}
	// Holds show what their task says: its phase and age, or "missing".
	for task, amount := range map[string]int64{"vt-listed": 10, "vt-gone": 7} {
		if _, err := ledger.New(c, c).Do(ctx, "acme", ledger.Freeze(task, amount)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ledger.New(c, c).Do(ctx, "acme", ledger.Reserve("r-apiserver-1", 40, 40, false)); err != nil {
		t.Fatal(err)
	}
	out, err = cli("account", "show", "acme")
	if err != nil || !regexp.MustCompile(`(?m)^vt-gone\s+7\s+missing\s+-$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^vt-listed\s+10\s+Pending\s+\d{4}-`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^acme\s+443\s+57\s+40\s+0\s+500\s`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^r-apiserver-1\s+40\s+\d{4}-`).MatchString(out) {
		t.Fatalf("account show with holds and a reservation: %v\n%s", err, out)
	}
	stripeSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "videogen-system", Name: "stripe",
		Labels: map[string]string{"videogen.dev/webhook-connector": "stripe"}}, StringData: map[string]string{"secret": "whsec_x"}}
	if err := c.Create(ctx, stripeSecret); err != nil {
		t.Fatal(err)
	}
	out, err = cli("connectors", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var conns []map[string]any
	if err := json.Unmarshal([]byte(out), &conns); err != nil || len(conns) != 6 {
		t.Fatalf("connectors: %v\n%s", err, out)
	}
	for _, conn := range conns {
		if ready := conn["connector"] == "stripe"; conn["ready"] != ready {
			t.Errorf("connector %v ready = %v, want %v", conn["connector"], conn["ready"], ready)
		}
	}
	if strings.Contains(out, "whsec_x") {
		t.Fatal("connectors printed a secret")
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

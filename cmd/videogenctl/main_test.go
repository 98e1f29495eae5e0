package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// TestAdministratorWorkflow drives the CLI against a real kube-apiserver with the top-up
// controller running: create an account, issue, list and revoke keys, top up, show.
func TestAdministratorWorkflow(t *testing.T) {
	// A platform administrator who holds only the roles config/rbac gives administrators.
	env, ctx, c, path := asPlatformAdmin(t)
	startTopUpController(t, ctx, env)
	var progress bytes.Buffer
	stderr = &progress
	t.Cleanup(func() { stderr = os.Stderr })

	cli := cliWith(ctx, path)

	if out, err := cli("account", "create", "acme", "--description", "ACME Corp"); err != nil || !strings.Contains(out, `account "acme" created`) {
		t.Fatalf("account create: %v\n%s", err, out)
	}
	if _, err := cli("account", "create", "acme"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second account create: %v", err)
	}
	if _, err := cli("apikey", "create", "--account", "nobody"); err == nil || !strings.Contains(err.Error(), `no account "nobody"`) {
		t.Fatalf("key for a missing account: %v", err)
	}
	// A top-up in a namespace without an account is refused before anything is created, or it
	// would be credited to whoever creates the account there later.
	if _, err := cli("topup", "default", "10", "--reference", "ORPHAN-2"); err == nil || !strings.Contains(err.Error(), `no account "default": create it first`) {
		t.Fatalf("top-up for a missing account: %v", err)
	}
	var orphans videogenv1alpha1.PointTopUpList
	if err := c.List(ctx, &orphans, client.InNamespace("default")); err != nil || len(orphans.Items) != 0 {
		t.Fatalf("the refused top-up left %d PointTopUps (%v)", len(orphans.Items), err)
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
	// In camelCase, as the other commands' JSON.
	out, err = cli("apikey", "list", "-o", "json")
	var listed []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0]["id"] != issued["id"] ||
		listed[0]["account"] != "acme" || listed[0]["description"] != "ci" || listed[0]["createdAt"] == nil {
		t.Fatalf("apikey list -o json: %v\n%s", err, out)
	}
	// -n names the account, as it does for task list: another account's key is not listed
	// under it, and a key created with -n acts for it.
	if out, err := cli("apikey", "list", "-n", "globex"); err != nil || strings.Contains(out, issued["id"]) {
		t.Fatalf("apikey list -n globex lists acme's key: %v\n%s", err, out)
	}
	if out, err := cli("apikey", "list", "-n", "acme"); err != nil || !strings.Contains(out, issued["id"]) {
		t.Fatalf("apikey list -n acme: %v\n%s", err, out)
	}
	out, err = cli("apikey", "create", "-n", "acme", "-o", "json")
	var byNamespace map[string]string
	if err != nil || json.Unmarshal([]byte(out), &byNamespace) != nil || byNamespace["account"] != "acme" {
		t.Fatalf("apikey create -n acme: %v\n%s", err, out)
	}
	if _, err := cli("apikey", "revoke", byNamespace["id"]); err != nil {
		t.Fatal(err)
	}

	progress.Reset() // apikey list -n globex's note that it found no key
	out, err = cli("topup", "acme", "500", "--reference", "INV-1")
	if err != nil || !strings.Contains(out, "balance is now 500") {
		t.Fatalf("topup: %v\n%s", err, out)
	}
	// Not a terminal: the wait is said once, without the spinner's control characters.
	if got := progress.String(); got != "waiting for the operator to credit 500 points …\n" {
		t.Errorf("progress while waiting = %q", got)
	}
	// "-5" reads as flags; the refusal says how a debit is written.
	if _, err := cli("topup", "acme", "-5", "--reference", "INV-2"); err == nil || !strings.Contains(err.Error(), "topup ACCOUNT 5 --debit") {
		t.Fatalf("a negative top-up: %v", err)
	}
	if _, err := cli("topup", "acme", "5"); err == nil {
		t.Fatal("a top-up without a reference was accepted")
	}
	out, err = cli("account", "show", "acme", "-o", "yaml")
	// It says whose account it is, as account create was told (it printed nothing of it before).
	if err != nil || !strings.Contains(out, "balance: 500") || !strings.Contains(out, "reference: INV-1") ||
		!strings.Contains(out, "description: ACME Corp") {
		t.Fatalf("account show: %v\n%s", err, out)
	}

	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-listed"},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
			Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}
	if err := c.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	out, err = cli("tasks", "--account", "acme")
	if err != nil || !regexp.MustCompile(`acme\s+vt-listed\s+video.eraser\s+queued\s+-\s+0%\s+-\s+-`).MatchString(out) {
		t.Fatalf("tasks: %v\n%s", err, out)
	}
	// Running its first stage with its points frozen, as the manager would write it.
	cost := int64(10)
	task.Status = videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskRunning, Cost: &cost, Charge: videogenv1alpha1.ChargeFrozen, Progress: 20,
		Stages: []videogenv1alpha1.StageStatus{{Name: videogenv1alpha1.StageAnalyze, State: videogenv1alpha1.StageRunning, Progress: 40},
			{Name: videogenv1alpha1.StageRender, State: videogenv1alpha1.StagePending}}}
	if err := c.Status().Update(ctx, task); err != nil {
		t.Fatal(err)
	}
	out, err = cli("tasks", "--account", "acme")
	if err != nil || !regexp.MustCompile(`(?m)^ACCOUNT\s+ID\s+CAPABILITY\s+STATUS\s+PHASE\s+PROGRESS\s+COST\s+CHARGE`).MatchString(out) ||
		!regexp.MustCompile(`acme\s+vt-listed\s+video.eraser\s+running\s+analyze\s+20%\s+10\s+Frozen`).MatchString(out) {
		t.Fatalf("tasks of a running task: %v\n%s", err, out)
	}
	if _, err := cli("tasks", "-o", "xml"); err == nil || !strings.Contains(err.Error(), `unknown output format "xml"`) {
		t.Fatalf("tasks -o xml: %v", err)
	}
	// The running task holds its points (the ledger counts it once it sees it): account show
	// lists it with its phase and age.
	var showOut string
	for range 100 {
		if showOut, err = cli("account", "show", "acme"); err == nil && regexp.MustCompile(`(?m)^acme\s+490\s+10\s+0\s+500\s.*\sACME Corp\s*$`).MatchString(showOut) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || !regexp.MustCompile(`(?m)^vt-listed\s+10\s+Running\s+\d{4}-`).MatchString(showOut) ||
		!regexp.MustCompile(`(?m)^acme\s+490\s+10\s+0\s+500\s.*\sACME Corp\s*$`).MatchString(showOut) {
		t.Fatalf("account show with a hold: %v\n%s", err, showOut)
	}
	if _, err := cli("topup", "acme", "5", "--debit", "--reference", "CORR-0"); err == nil || !strings.Contains(err.Error(), "needs --note") {
		t.Fatalf("a debit without a note: %v", err)
	}
	// A debit, with its note, shows in the account's top-ups.
	if out, err := cli("topup", "acme", "90", "--debit", "--reference", "CORR-1", "--note", "double invoice"); err != nil || !strings.Contains(out, "debited 90 points from acme (reference CORR-1); balance is now 400") {
		t.Fatalf("debit: %v\n%s", err, out)
	}
	if out, err := cli("account", "show", "acme"); err != nil || !regexp.MustCompile(`(?m)^topup-\S+\s+-90\s+CORR-1\s+\d{4}-\S+\s+400\s+double invoice\s*$`).MatchString(out) {
		t.Fatalf("account show with a debit: %v\n%s", err, out)
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
	if _, err := cli("apikey", "revoke", issued["id"]); err == nil || !strings.Contains(err.Error(), "revoked already") {
		t.Fatalf("revoking twice did not say the key is unknown or revoked already: %v", err)
	}

	// account show lists the newest top-ups only.
	for i := range 11 {
		later := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: fmt.Sprintf("zz-later-%02d", i)},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: 1, Reference: fmt.Sprintf("INV-later-%02d", i)}}
		if err := c.Create(ctx, later); err != nil {
			t.Fatal(err)
		}
	}
	out, err = cli("account", "show", "acme", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var shown struct {
		RecentTopUps []struct{ Name string } `json:"recentTopUps"`
		OlderTopUps  int                     `json:"olderTopUps"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatal(err)
	}
	if len(shown.RecentTopUps) != 10 || shown.RecentTopUps[0].Name != "zz-later-10" || shown.RecentTopUps[9].Name != "zz-later-01" || shown.OlderTopUps != 3 {
		t.Errorf("account show lists top-ups %+v, %d older; want the 10 newest first, 3 older (INV-1, the debit, zz-later-00)", shown.RecentTopUps, shown.OlderTopUps)
	}

	// A reference already applied is refused, and the refusal says so once.
	if _, err := cli("topup", "acme", "5", "--reference", "INV-1"); err == nil || !strings.Contains(err.Error(), `refused: reference "INV-1" was already applied`) {
		t.Errorf("a second top-up with reference INV-1: %v", err)
	}

	// --context picks a kubeconfig context, as kubectl's does.
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli("tasks", "--context", kc.CurrentContext); err != nil {
		t.Errorf("--context %s: %v", kc.CurrentContext, err)
	}
	if _, err := cli("tasks", "--context", "no-such-context"); err == nil || !strings.Contains(err.Error(), "no-such-context") {
		t.Errorf("--context no-such-context: %v", err)
	}
}

// bindAdminRoles binds user to the administrators' roles exactly as config/rbac defines them,
// the namespaced one in the operator's namespace.
// asPlatformAdmin starts a control plane with the operator's namespace and returns, beside it,
// the kubeconfig of a user bound to the platform administrator's roles, as docs/deploy.md binds
// them.
func asPlatformAdmin(t *testing.T) (*envtest.Environment, context.Context, client.Client, string) {
	t.Helper()
	env, ctx, c := startControlPlane(t)
	path := kubeconfigFor(t, env, envtest.User{Name: "platform-admin"})
	mustCreateNamespace(t, ctx, c, "videogen-system")
	bindAdminRoles(t, ctx, c, "platform-admin", "videogen-system")
	return env, ctx, c, path
}

func bindAdminRoles(t *testing.T, ctx context.Context, c client.Client, user, operatorNS string) {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	var cr rbacv1.ClusterRole
	readYAML(t, filepath.Join(root, "config/rbac/platform_admin_role.yaml"), &cr)
	var role rbacv1.Role
	readYAML(t, filepath.Join(root, "config/rbac/platform_admin_keys_role.yaml"), &role)
	role.Namespace = operatorNS
	for _, obj := range []client.Object{&cr, &role,
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-admin"}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: user + "-keys"}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// startControlPlane starts a kube-apiserver of its own for one test, stopped when it ends: its
// client (with the cluster's powers) and a context that ends with the test.
func startControlPlane(t *testing.T) (*envtest.Environment, context.Context, client.Client) {
	t.Helper()
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return env, ctx, c
}

// kubeconfigFor writes a kubeconfig of user, added to env, into the test's temporary directory.
func kubeconfigFor(t *testing.T, env *envtest.Environment, u envtest.User) string {
	t.Helper()
	user, err := env.AddUser(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustCreateNamespace(t *testing.T, ctx context.Context, c client.Client, name string) {
	t.Helper()
	if err := c.Create(ctx, namespace(&metav1.ObjectMeta{Name: name})); err != nil {
		t.Fatal(err)
	}
}

func startTopUpController(t *testing.T, ctx context.Context, env *envtest.Environment) {
	t.Helper()
	// Each test that needs it starts its own: one controller name per process is a metrics
	// concern, not a test's.
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ledger.NewSigner([]byte("videogenctl-test-signing-key-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	l := ledger.New(ledger.Config{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Cache: mgr.GetCache(),
		Signer: signer, Identity: "videogenctl-test", WriteInterval: 50 * time.Millisecond})
	if err := mgr.Add(l); err != nil {
		t.Fatal(err)
	}
	// A FakeRecorder with a channel blocks the reconciler at its buffer's size; without one it
	// drops the events, which no test reads.
	r := &controllers.PointTopUpReconciler{Client: mgr.GetClient(), Ledger: l, Recorder: &events.FakeRecorder{}}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
}

// A mistyped subcommand of a group is an error naming the group's commands, not the group's
// help with exit status 0; the group alone still shows its help.
func TestGroupsRefuseUnknownSubcommands(t *testing.T) {
	for _, args := range [][]string{{"task", "describe", "vt-x"}, {"account", "list"}, {"apikey", "delete", "x"}, {"completion", "nosh"}} {
		var out bytes.Buffer
		err := run(context.Background(), args, &out)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("unknown command %q", args[1])) || !strings.Contains(err.Error(), "its commands: ") {
			t.Errorf("%v: err = %v, out = %q", args, err, out.String())
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"completion", "nosh"}, &out); err == nil || !strings.Contains(err.Error(), "bash, fish, powershell, zsh") {
		t.Errorf("completion nosh does not name the shells: %v", err)
	}
	if err := run(context.Background(), []string{"task"}, &out); err != nil || !strings.Contains(out.String(), "Available Commands:") {
		t.Errorf("task alone: %v\n%s", err, out.String())
	}
}

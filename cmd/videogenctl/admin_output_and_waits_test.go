package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
)

// The administrators' CLI: a bad output format, write commands' JSON, top-up waits, task
// cancel's output.

// An -o the command cannot print is refused before anything is written. Interleaving: the
// administrator types `topup acme 500 --reference INV-1 -o jsn` (a typo of json; or -o name,
// which the task commands accept and the help lists). Before the fix the CLI created the
// PointTopUp, waited until the operator credited it, and only then failed to print: exit
// status 1, "unknown output format", and nothing on stdout. The points had moved; a script (or
// the administrator) reads the failure as "not credited" and credits again under a fresh
// reference. The same for `apikey create -o jsn`: the key was issued and its secret, shown
// once, never shown, and for `account create`. Every step is an ordinary command line.
func TestBadOutputFormatChangesNothing(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	mustCreateNamespace(t, ctx, c, "videogen-system")
	startTopUpController(t, ctx, env)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	cli := cliWith(ctx, kubeconfig)
	if _, err := cli("account", "create", "acme"); err != nil {
		t.Fatal(err)
	}

	for _, format := range []string{"jsn", "name"} {
		if _, err := cli("topup", "acme", "500", "--reference", "INV-"+format, "-o", format); err == nil || !strings.Contains(err.Error(), "unknown output format") {
			t.Errorf("topup -o %s: %v, want unknown output format", format, err)
		}
		if _, err := cli("apikey", "create", "--account", "acme", "-o", format); err == nil || !strings.Contains(err.Error(), "unknown output format") {
			t.Errorf("apikey create -o %s: %v, want unknown output format", format, err)
		}
		if _, err := cli("account", "create", "globex-"+format, "-o", format); err == nil || !strings.Contains(err.Error(), "unknown output format") {
			t.Errorf("account create -o %s: %v, want unknown output format", format, err)
		}
	}
	var topUps videogenv1alpha1.PointTopUpList
	if err := c.List(ctx, &topUps, client.InNamespace("acme")); err != nil {
		t.Fatal(err)
	}
	for _, tu := range topUps.Items {
		t.Errorf("a refused command line left PointTopUp %s (amount %d, applied %v)", tu.Name, tu.Spec.Amount, tu.Status.AppliedAt != nil)
	}
	keys, err := apikeys.List(ctx, c, "videogen-system", "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		t.Errorf("a refused command line issued API key %s, whose secret nobody saw", k.ID)
	}
	var accounts videogenv1alpha1.PointAccountList
	if err := c.List(ctx, &accounts); err != nil {
		t.Fatal(err)
	}
	if len(accounts.Items) != 1 {
		t.Errorf("a refused account create made an account: %d accounts", len(accounts.Items))
	}
}

// -o json is JSON on every command. Input: `topup acme 5 --reference R --no-wait -o json`,
// `account create globex -o json`, `apikey revoke ID -o json`. Before the fix each printed its
// English sentence ("top-up topup-… created") whatever -o said, so a script that parses the
// answer (to keep the top-up's name, to check what it did) fails on a command that succeeded,
// and may run it again.
func TestWriteCommandsPrintJSON(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	mustCreateNamespace(t, ctx, c, "videogen-system")
	cli := cliWith(ctx, kubeconfig)
	jsonOf := func(args ...string) map[string]any {
		t.Helper()
		out, err := cli(append(args, "-o", "json")...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Errorf("%v -o json printed no JSON (%v):\n%s", args, err, out)
		}
		return v
	}
	if v := jsonOf("account", "create", "globex"); v != nil && v["account"] != "globex" {
		t.Errorf("account create -o json = %v", v)
	}
	if v := jsonOf("topup", "globex", "5", "--reference", "R-1", "--no-wait"); v != nil {
		name, _ := v["topUp"].(string)
		if err := c.Get(ctx, client.ObjectKey{Namespace: "globex", Name: name}, &videogenv1alpha1.PointTopUp{}); err != nil || v["reference"] != "R-1" {
			t.Errorf("topup --no-wait -o json = %v: %v", v, err)
		}
	}
	key := jsonOf("apikey", "create", "--account", "globex")
	if id, _ := key["id"].(string); id != "" {
		if v := jsonOf("apikey", "revoke", id); v != nil && v["id"] != id {
			t.Errorf("apikey revoke -o json = %v", v)
		}
	}
}

// A top-up that waits for its account is not refused. Interleaving: a PointTopUp is applied
// (kubectl apply, GitOps) in a namespace before its account exists, and the controller marks
// it Applied=False, AccountNotFound, "applied when it exists"; the administrator then creates
// the account. Until the ledger applies it (at once normally; during a manager failover only
// once the new leader's books are ready) `account show` listed it as "refused: AccountNotFound"
// and -o json said refused: AccountNotFound, which the field's documentation reserves for a
// top-up "never applied". An administrator who believes it re-credits under a new reference:
// then both are credited.
func TestAccountShowDoesNotCallAWaitingTopUpRefused(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	mustCreateNamespace(t, ctx, c, "acme")
	tu := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "inv-7"},
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 300, Reference: "INV-7"}}
	if err := c.Create(ctx, tu); err != nil {
		t.Fatal(err)
	}
	// What the top-up controller writes while the namespace has no account.
	meta.SetStatusCondition(&tu.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied, Status: metav1.ConditionFalse,
		Reason: videogenv1alpha1.ReasonAccountNotFound, Message: `namespace "acme" has no PointAccount named "default" yet; the top-up is applied when it exists`})
	if err := c.Status().Update(ctx, tu); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}); err != nil {
		t.Fatal(err)
	}
	cli := cliWith(ctx, kubeconfig)
	out, err := cli("account", "show", "acme", "-o", "json")
	var shown accountView
	if err != nil || json.Unmarshal([]byte(out), &shown) != nil || len(shown.RecentTop) != 1 {
		t.Fatalf("account show -o json: %v\n%s", err, out)
	}
	if r := shown.RecentTop[0].Refused; r != "" {
		t.Errorf("account show -o json says the waiting top-up INV-7 was refused (%q); it is applied once the ledger gets to it", r)
	}
	out, err = cli("account", "show", "acme")
	if err != nil || strings.Contains(out, "refused") || !strings.Contains(out, "pending") {
		t.Errorf("account show calls the waiting top-up refused, or not pending: %v\n%s", err, out)
	}
}

// A read that fails while topup waits does not end the wait. Interleaving: topup creates the
// PointTopUp and polls it; one of its GETs fails (a 500 from a kube-apiserver whose etcd is
// changing leader, a load balancer's 503, a dropped connection), with no Retry-After, so
// client-go does not retry it. Before the fix the first failed read ended the wait at once:
// exit 1, "top-up … not applied yet: is the operator running?", the read's error swallowed;
// the operator credits the top-up a moment later. The administrator, told it did not apply and
// blamed on the operator, credits it again under another reference. The proxy below fails
// exactly the first GET of the created top-up; everything else reaches the kube-apiserver.
func TestTopUpWaitSurvivesAFailedRead(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	startTopUpController(t, ctx, env)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	if err := c.Create(ctx, namespace(&metav1.ObjectMeta{Name: "acme"})); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}); err != nil {
		t.Fatal(err)
	}
	var failed atomic.Int32
	flags := kubeProxy(t, env, func(w http.ResponseWriter, r *http.Request, proxy http.Handler) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/namespaces/acme/pointtopups/topup-") && failed.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcdserver: leader changed","reason":"InternalError","code":500}`)
			return
		}
		proxy.ServeHTTP(w, r)
	})
	var out bytes.Buffer
	err := run(ctx, append([]string{"topup", "acme", "500", "--reference", "INV-1"}, flags...), &out)
	if failed.Load() == 0 {
		t.Fatalf("the proxy failed no read: the test did not test anything (%v)", err)
	}
	if err != nil || !strings.Contains(out.String(), "balance is now 500") {
		t.Errorf("one failed read during the wait: %v\n%s", err, out.String())
	}
	// Whatever the CLI said, the operator credits it.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var list videogenv1alpha1.PointTopUpList
		if err := c.List(ctx, &list, client.InNamespace("acme")); err != nil || len(list.Items) != 1 {
			return false, err
		}
		return list.Items[0].Status.AppliedAt != nil, nil
	})
	if err != nil {
		t.Errorf("the top-up was not applied: %v", err)
	}
}

// task cancel checks -o before it cancels, and prints the task as -o says. Input: `task cancel
// vt-1 -n acme -o jsn` (a typo) and `-o name` (which every other task command honours). Before
// the fix cancel ignored -o: the typo canceled the task and exited 0 with the English sentence,
// and -o name/json printed that sentence where a script expects the object.
func TestTaskCancelHonoursOutput(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	mustCreateNamespace(t, ctx, c, "acme")
	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-1"},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
			Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}
	if err := c.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	cli := cliWith(ctx, kubeconfig)
	if _, err := cli("task", "cancel", "vt-1", "-n", "acme", "-o", "jsn"); err == nil || !strings.Contains(err.Error(), "unknown output format") {
		t.Errorf("task cancel -o jsn: %v, want unknown output format", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(task), task); err != nil || task.Annotations[videogenv1alpha1.AnnotationCancelRequested] != "" {
		t.Errorf("task cancel -o jsn canceled the task: %v %v", err, task.Annotations)
	}
	if out, err := cli("task", "cancel", "vt-1", "-n", "acme", "-o", "name"); err != nil || out != "videotask.videogen.dev/vt-1\n" {
		t.Errorf("task cancel -o name: %q %v", out, err)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
)

// videogenctl as a new user meets it: task watch, API keys, accounts and namespaces, top-ups.

// `task watch NAME` of a running task that is deleted answers "did not succeed" (exit status
// 1), as it does for a task that failed or was canceled, not "could not follow it" (2).
// Interleaving: 1. a script runs `videogenctl task watch vt-1 -n acme && publish || resubmit`
// on a running task; the CLI lists it (printing its row) and opens a watch from that listing.
// 2. The task is deleted (`kubectl delete videotask vt-1`, a tenant giving up on it, a
// namespace deleted): the kube-apiserver sends the watch its Deleted event, whose object is the
// task as it was, still Running. The help and the README define the exit status: 0 succeeded,
// 1 "ended otherwise", 2 "could not be followed (no such task, the cluster unreachable,
// interrupted before it ended)", telling the answer from an error as kubectl diff does. A
// deleted task has ended, without a result, for good: it is an answer. Before the fix the CLI
// exited 2, which a script reads as "the watch itself failed, try again": it ran the watch again,
// which said "no task" (2) forever, and never reached its `|| resubmit`; a canceled task, which
// the same deletion would have been through `task cancel`, exits 1. Here the deletion comes
// when the first row is printed, before the watch opens; the watch, opened from the listing's
// resourceVersion, is sent the Deleted event all the same, so the event path is what runs.
func TestWatchOfADeletedRunningTaskSaysItDidNotSucceed(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "acme")
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-1"},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
			Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}
	if err := c.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	task.Status = videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskRunning, Progress: 20}
	if err := c.Status().Update(ctx, task); err != nil {
		t.Fatal(err)
	}
	watchCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out := &onWrite{do: func(n int) {
		if n == 1 { // step 2, once the listing's row is printed (no finalizer: gone at once)
			if err := c.Delete(ctx, task); err != nil {
				t.Error(err)
			}
		}
	}}
	err := run(watchCtx, []string{"task", "watch", "vt-1", "-n", "acme", "--kubeconfig", kubeconfig}, out)
	if watchCtx.Err() != nil {
		t.Fatalf("task watch did not end when the task was deleted: %v", err)
	}
	if err == nil || !strings.Contains(err.Error(), "vt-1 was deleted") || exitCode(err) != 1 || !errors.Is(err, errTaskDidNotSucceed) {
		t.Errorf("task watch of a running task deleted: %v (exit status %d); want \"task vt-1 was deleted ...\", exit status 1 as for a failed task", err, exitCode(err))
	}
}

// apikey list is newest first, as task list and account show's top-ups are. Input: an
// administrator issues a key for acme (its id happens to be 000000000000), a second later one
// for globex (aaaaaaaaaaaa), and a second later a new one for acme (ffffffffffff) to rotate the
// first; then `apikey list` (and `apikey list -n acme`) to find the old one to revoke. Before
// the fix the list came in the kube-apiserver's order, by Secret name, that is by the keys'
// random ids: neither by time nor by account, a different order for every set of keys, so
// the newest key was anywhere in the table and "the last one" in a script (`jq '.[0]'`) was a
// random key. The keys are Secrets as apikey create writes them, with ids chosen so that the
// ids' order is the oldest first; each waits for the next second (the kube-apiserver keeps
// creationTimestamp to the second) so that the three have different creation times.
func TestAPIKeyListIsNewestFirst(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "videogen-system")
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	var last time.Time
	for _, k := range []struct{ id, account string }{{"000000000000", "acme"}, {"aaaaaaaaaaaa", "globex"}, {"ffffffffffff", "acme"}} {
		for !last.IsZero() && time.Now().Truncate(time.Second).Equal(last) {
			time.Sleep(10 * time.Millisecond) // until the next second: a condition, not a guess
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "videogen-system", Name: apikeys.SecretName(k.id),
			Labels:      map[string]string{apikeys.LabelAPIKey: "true", apikeys.LabelAccount: k.account, apikeys.LabelKeyID: k.id},
			Annotations: map[string]string{apikeys.AnnotationDescription: "key " + k.id}}}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		last = s.CreationTimestamp.Time
	}
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, "--kubeconfig", kubeconfig), &out)
		return out.String(), err
	}
	out, err := cli("apikey", "list")
	if ids := regexp.MustCompile(`(?m)^([0-9a-f]{12})\s`).FindAllStringSubmatch(out, -1); err != nil || len(ids) != 3 ||
		ids[0][1] != "ffffffffffff" || ids[1][1] != "aaaaaaaaaaaa" || ids[2][1] != "000000000000" {
		t.Errorf("apikey list: %v; want the newest first (ffffffffffff, aaaaaaaaaaaa, 000000000000)\n%s", err, out)
	}
	out, err = cli("apikey", "list", "-n", "acme", "-o", "json")
	if err != nil || !regexp.MustCompile(`(?s)"id": "ffffffffffff".*"id": "000000000000"`).MatchString(out) {
		t.Errorf("apikey list -n acme -o json: %v; want ffffffffffff before 000000000000\n%s", err, out)
	}
}

// apikey revoke given the key itself revokes it, or says plainly what it wants; never "revoked
// already" of a key that works. Input: an administrator told that a key leaked (it is in a
// CI log: `vg_3f9a…_…`) runs `videogenctl apikey revoke vg_3f9a…_…`, pasting what they have,
// as `gh auth`/`stripe` CLIs take the secret; or the Secret's name from `kubectl get secrets`,
// `apikey-3f9a…`; or the id in capitals, as a support ticket spells it. Before the fix each
// was taken as an id, the Secret "apikey-vg_3f9a…" (or "apikey-apikey-3f9a…") was not found,
// and the CLI answered `no API key with id …: it was never issued, or is revoked already`,
// exit status 1: the administrator, told the key is revoked already, stops, and the leaked key
// goes on working. Now a full key and a Secret's name revoke their key, and anything that is
// not an id is refused as such, with what an id looks like.
func TestAPIKeyRevokeOfTheKeyItselfRevokesIt(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "videogen-system")
	mustCreateNamespace(t, ctx, c, "acme")
	if err := c.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, "--kubeconfig", kubeconfig), &out)
		return out.String(), err
	}
	auth := &apikeys.Authenticator{Reader: c, Namespace: "videogen-system"}
	for _, spelling := range []func(key, id string) string{
		func(key, _ string) string { return key },
		func(_, id string) string { return apikeys.SecretName(id) },
		func(_, id string) string { return strings.ToUpper(id) },
	} {
		out, err := cli("apikey", "create", "--account", "acme", "-o", "json")
		var issued map[string]string
		if err != nil || json.Unmarshal([]byte(out), &issued) != nil {
			t.Fatalf("apikey create: %v\n%s", err, out)
		}
		arg := spelling(issued["key"], issued["id"])
		out, err = cli("apikey", "revoke", arg)
		_, authErr := auth.Authenticate(ctx, issued["key"])
		switch {
		case err != nil && strings.Contains(err.Error(), "revoked already") && authErr == nil:
			t.Errorf("apikey revoke %s: %v, and the key still works", arg, err)
		case err == nil && authErr == nil:
			t.Errorf("apikey revoke %s said %q, and the key still works", arg, out)
		case err != nil && !strings.Contains(err.Error(), "12 hex digits"):
			t.Errorf("apikey revoke %s: %v; want it revoked, or told what an id looks like", arg, err)
		}
		if err != nil && strings.Contains(err.Error(), issued["key"][16:]) {
			t.Errorf("apikey revoke printed the key's secret: %v", err)
		}
	}
	// A key cut short in the paste is not an id either, and is not echoed.
	if _, err := cli("apikey", "revoke", "vg_0123456789ab_SECRETPART"); err == nil || !strings.Contains(err.Error(), "12 hex digits") ||
		strings.Contains(err.Error(), "SECRETPART") {
		t.Errorf("apikey revoke of a cut key: %v; want told what an id is, without the key", err)
	}
}

// `task watch` without NAME exits 2 on every error, as its help says of a missing account and
// as `task watch NAME` does, not 1 for some. Input: a supervisor script keeps
// `videogenctl task watch -n acme` running and restarts it on exit status 2 (an error: the
// cluster unreachable for a moment, an expired token), alerting otherwise; or a user reads
// `task watch --help` ("2 if it could not be followed (... the cluster unreachable ...)";
// "an account that does not exist is an error (exit status 2)"). Before the fix only the
// missing account exited 2: the cluster unreachable, a refusal (forbidden) or a bad -o exited
// 1, the status `task watch NAME` gives for a task that did not succeed.
func TestTaskWatchOfAnAccountExits2OnEveryError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now: connections are refused
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--server", "https://" + addr, "--insecure-skip-tls-verify", "--kubeconfig", kubeconfig}
	for _, args := range [][]string{
		{"task", "watch", "-n", "acme"},
		{"task", "watch"},
		{"task", "watch", "-n", "acme", "-o", "xml"},
	} {
		err := run(context.Background(), append(args, flags...), io.Discard)
		if err == nil || exitCode(err) != exitWatchFailed {
			t.Errorf("%v: %v (exit status %d); want exit status %d, an error", args, err, exitCode(err), exitWatchFailed)
		}
	}
}

// task cancel does not say "cancel requested ... its points are refunded" of a task that
// succeeded (and was charged) before the cancel reached it. Interleaving: 1. an administrator
// runs `task cancel vt-1 -n acme` for a customer who asks their money back; the CLI reads the
// task: Running, at 95%. 2. The task succeeds: the controller charges it and writes Succeeded,
// Deducted (a render ending, any moment). 3. The CLI's merge patch of the cancel annotation
// lands on the finished task (a merge patch has no precondition, and nothing refuses an
// annotation), and the kube-apiserver answers with the task as it now is: Succeeded. No
// controller acts on a cancel of a finished task: nothing is refunded. Before the fix the CLI
// printed "cancel requested for task vt-1; its points are refunded when it stops", exit
// status 0, from its first read: the administrator told the customer they were refunded. Now
// it reads the answer of its patch, as it read the task before: "task vt-1 already succeeded
// and cannot be canceled", exit status 1. The proxy plays step 2 when the PATCH comes.
func TestTaskCancelSaysWhenTheTaskEndedFirst(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "acme")
	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-1"},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
			Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}
	if err := c.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	cost := int64(10)
	task.Status = videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskRunning, Progress: 95, Cost: &cost, Charge: videogenv1alpha1.ChargeFrozen}
	if err := c.Status().Update(ctx, task); err != nil {
		t.Fatal(err)
	}
	flags := kubeProxy(t, env, func(w http.ResponseWriter, r *http.Request, proxy http.Handler) {
		if r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/namespaces/acme/videotasks/vt-1") {
			// Step 2: the task succeeds, charged, before the cancel lands.
			task.Status.Phase, task.Status.Progress, task.Status.Charge = videogenv1alpha1.TaskSucceeded, 100, videogenv1alpha1.ChargeDeducted
			task.Status.Result = &videogenv1alpha1.TaskResult{URL: "https://media.example/out.mp4"}
			if err := c.Status().Update(context.Background(), task); err != nil {
				t.Error(err)
			}
		}
		proxy.ServeHTTP(w, r)
	})
	var out bytes.Buffer
	err := run(ctx, append([]string{"task", "cancel", "vt-1", "-n", "acme"}, flags...), &out)
	if err == nil || !strings.Contains(err.Error(), "already succeeded") || strings.Contains(out.String(), "refunded") {
		t.Errorf("task cancel of a task that succeeded before the cancel landed: %v (exit status %d)\n%s; want \"task vt-1 already succeeded and cannot be canceled\"", err, exitCode(err), out.String())
	}
}

// task watch NAME follows the task it was started on, not another one given the same name
// since. Interleaving: 1. `task watch render-42 -n acme` (a kubectl-made task, its name chosen
// by a script) lists the task, Running, and opens a watch. 2. The kube-apiserver ends the watch
// (its timeout, a restart). 3. Before the CLI lists again, the task is deleted and the script
// creates render-42 again with other inputs (its retry), which runs and succeeds. 4. The CLI
// lists by name and finds render-42. Before the fix it took the new task for the one it
// watched: it printed it and exited 0, "succeeded", for a task that was deleted unfinished,
// and the script published the other task's result as this one's. Now a listed task with
// another UID than the one watched means the watched one was deleted: exit status 1, as for
// a deletion seen by the watch. The proxy plays steps 2 and 3 on the first watch.
func TestTaskWatchDoesNotFollowANewTaskOfTheSameName(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "acme")
	newTask := func() *videogenv1alpha1.VideoTask {
		return &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "render-42"},
			Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
				Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}
	}
	task := newTask()
	if err := c.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	task.Status = videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskRunning, Progress: 20}
	if err := c.Status().Update(ctx, task); err != nil {
		t.Fatal(err)
	}
	var watches atomic.Int32
	rewatched := make(chan struct{})
	flags := kubeProxy(t, env, func(w http.ResponseWriter, r *http.Request, proxy http.Handler) {
		if r.URL.Query().Get("watch") == "true" && strings.Contains(r.URL.Path, "/namespaces/acme/videotasks") {
			switch watches.Add(1) {
			case 1: // steps 2 and 3
				bg := context.Background()
				if err := c.Delete(bg, task); err != nil {
					t.Error(err)
				}
				for c.Get(bg, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{}) == nil {
				}
				again := newTask()
				if err := c.Create(bg, again); err != nil {
					t.Error(err)
				}
				cost := int64(10)
				again.Status = videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskSucceeded, Progress: 100,
					Cost: &cost, Charge: videogenv1alpha1.ChargeDeducted, Result: &videogenv1alpha1.TaskResult{URL: "https://media.example/out.mp4"}}
				if err := c.Status().Update(bg, again); err != nil {
					t.Error(err)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				return
			case 2:
				close(rewatched)
			}
		}
		proxy.ServeHTTP(w, r)
	})
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		done <- run(watchCtx, append([]string{"task", "watch", "render-42", "-n", "acme"}, flags...), &out)
	}()
	var err error
	select {
	case err = <-done:
	case <-rewatched:
		cancel()
		err = <-done
	}
	if err == nil || !strings.Contains(err.Error(), "render-42 was deleted") || exitCode(err) != 1 {
		t.Errorf("task watch of a task deleted and created again under its name: %v (exit status %d)\n%s; want \"task render-42 was deleted ...\", exit status 1",
			err, exitCode(err), out.String())
	}
}

// Naming an account twice, differently, is refused before anything is made. Input: an
// administrator whose shell alias adds `-n globex` (or who copies `-n globex` from the line
// above) runs `apikey create --account acme -n globex`, or `task list --account acme -n
// globex`. Before the fix --account won silently: a key for acme was issued (and handed to
// whoever asked for a globex key: acme's points, spent by another customer), and the listing
// showed acme's tasks under a command line that says globex. Now the CLI says the two name
// different accounts, exit status 1, and no key is issued.
func TestAccountAndNamespaceThatDisagreeAreRefused(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "videogen-system")
	for _, ns := range []string{"acme", "globex"} {
		mustCreateNamespace(t, ctx, c, ns)
		if err := c.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: videogenv1alpha1.PointAccountName}}); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	for _, args := range [][]string{
		{"apikey", "create", "--account", "acme", "-n", "globex", "-o", "json"},
		{"apikey", "list", "--account", "acme", "-n", "globex"},
		{"task", "list", "--account", "acme", "-n", "globex"},
	} {
		var out bytes.Buffer
		err := run(ctx, append(args, "--kubeconfig", kubeconfig), &out)
		if err == nil || !strings.Contains(err.Error(), "different accounts") {
			t.Errorf("%v: %v\n%s; want refused: --account and -n name different accounts", args, err, out.String())
		}
	}
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace("videogen-system"), client.HasLabels{apikeys.LabelAPIKey}); err != nil || len(secrets.Items) != 0 {
		t.Errorf("a key was issued (%d, %v)", len(secrets.Items), err)
	}
	// The same account twice is one account.
	var out bytes.Buffer
	if err := run(ctx, []string{"apikey", "list", "--account", "acme", "-n", "acme", "--kubeconfig", kubeconfig}, &out); err != nil {
		t.Errorf("apikey list --account acme -n acme: %v", err)
	}
}

// account show takes the account from -n as the other commands do. Input: a new user who has
// typed `task list -n acme` and `apikey list -n acme` (the README's lines) runs `account show -n
// acme`. Before the fix: "usage: videogenctl account show NAME", exit status 1, though -n is
// among the command's flags in its help. Now -n names the account when NAME is not given.
func TestAccountShowTakesTheNamespaceFlag(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "acme")
	if err := c.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	var out bytes.Buffer
	if err := run(ctx, []string{"account", "show", "-n", "acme", "-o", "json", "--kubeconfig", kubeconfig}, &out); err != nil ||
		!strings.Contains(out.String(), `"account": "acme"`) {
		t.Errorf("account show -n acme: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"account", "show", "--kubeconfig", kubeconfig}, &out); err == nil || !strings.Contains(err.Error(), "usage:") {
		t.Errorf("account show without an account: %v; want its usage", err)
	}
}

// apikey list does not list a revoked key as one that works. Interleaving: 1. a key's Secret
// carries a finalizer of some other tool (a backup or GitOps controller that guards the
// Secrets of the operator's namespace; docs/api.md: "A revoked key whose Secret a finalizer
// keeps is refused all the same"). 2. An administrator runs `apikey revoke ID`: the Secret is
// marked deleted and stays until that tool lets it go; the REST API refuses the key from that
// moment. 3. They check with `apikey list`, which the revoke's own error message calls "the
// keys that work". Before the fix the key was listed as any other, so the administrator,
// told it is still there, revoked it again (exit 0, "revoked") and again, or escalated a
// revocation that had worked; a billing script counting a customer's keys counted it. Now a
// key whose Secret is being deleted is not listed.
func TestAPIKeyListLeavesOutARevokedKeyAFinalizerKeeps(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "videogen-system")
	mustCreateNamespace(t, ctx, c, "acme")
	if err := c.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, "--kubeconfig", kubeconfig), &out)
		return out.String(), err
	}
	out, err := cli("apikey", "create", "--account", "acme", "-o", "json")
	var issued map[string]string
	if err != nil || json.Unmarshal([]byte(out), &issued) != nil {
		t.Fatalf("apikey create: %v\n%s", err, out)
	}
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: "videogen-system", Name: apikeys.SecretName(issued["id"])}
	if err := c.Get(ctx, key, secret); err != nil {
		t.Fatal(err)
	}
	secret.Finalizers = append(secret.Finalizers, "backup.example.com/keep") // step 1
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // let it go, for the control plane's stop
		if err := c.Get(context.Background(), key, secret); err == nil {
			secret.Finalizers = nil
			_ = c.Update(context.Background(), secret)
		}
	})
	if _, err := cli("apikey", "revoke", issued["id"]); err != nil { // step 2
		t.Fatal(err)
	}
	if _, err := (&apikeys.Authenticator{Reader: c, Namespace: "videogen-system"}).Authenticate(ctx, issued["key"]); err == nil {
		t.Fatal("the revoked key still authenticates")
	}
	out, err = cli("apikey", "list", "-o", "json") // step 3
	if err != nil || strings.Contains(out, issued["id"]) {
		t.Errorf("apikey list after the key was revoked: %v\n%s; want it left out", err, out)
	}
}

// An operator installed outside videogen-system: apikey revoke and apikey list say which
// namespace they looked in. Input: the chart installed into "videogen" (helm install -n
// videogen); its notes say `videogenctl apikey create --account acme --key-namespace videogen`,
// which issues a key there. Later the administrator revokes it with `apikey revoke ID`, as
// the README writes it, without --key-namespace. Before the fix the CLI looked in
// videogen-system and answered "no API key with id …: it was never issued, or is revoked
// already", exit status 1: nothing about where it looked, and the key went on working (and
// `apikey list` printed an empty table, exit 0). Now both name the namespace and the flag.
func TestAPIKeyCommandsNameTheNamespaceTheyLookIn(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "videogen")
	mustCreateNamespace(t, ctx, c, "acme")
	if err := c.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	var notes bytes.Buffer
	stderr = &notes
	t.Cleanup(func() { stderr = os.Stderr })
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, "--kubeconfig", kubeconfig), &out)
		return out.String(), err
	}
	out, err := cli("apikey", "create", "--account", "acme", "--key-namespace", "videogen", "-o", "json")
	var issued map[string]string
	if err != nil || json.Unmarshal([]byte(out), &issued) != nil {
		t.Fatalf("apikey create: %v\n%s", err, out)
	}
	if _, err := cli("apikey", "revoke", issued["id"]); err == nil || !strings.Contains(err.Error(), `"videogen-system"`) ||
		!strings.Contains(err.Error(), "--key-namespace") {
		t.Errorf("apikey revoke in the wrong namespace: %v; want the namespace it looked in and --key-namespace", err)
	}
	notes.Reset()
	if _, err := cli("apikey", "list"); err != nil || !strings.Contains(notes.String(), `"videogen-system"`) || !strings.Contains(notes.String(), "--key-namespace") {
		t.Errorf("apikey list of no key: %v, stderr %q; want a note naming the namespace and --key-namespace", err, notes.String())
	}
}

// topup interrupted while it waits says that the top-up stands. Input: an administrator runs
// `topup acme 1000 --reference INV-7`, sees the spinner wait (the manager is failing over), and
// presses Ctrl-C, as one stops any command, thinking the credit is called off. Before the fix
// the CLI answered "top-up … not applied yet: is the operator running?", exit status 1: not
// that it was interrupted, nor that the PointTopUp it created stays and is credited when the
// operator gets to it; an administrator who then credits the customer another way (a second
// top-up with another reference) credits them twice. Now it says it was interrupted, that the
// top-up will be applied all the same, and how to follow it.
func TestTopUpInterruptedSaysTheTopUpStands(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "acme")
	if err := c.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	topUpCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	done := make(chan error, 1)
	go func() {
		done <- run(topUpCtx, []string{"topup", "acme", "1000", "--reference", "INV-7", "--kubeconfig", kubeconfig}, io.Discard)
	}()
	// Ctrl-C once the top-up exists (no manager runs: it waits).
	var topUps videogenv1alpha1.PointTopUpList
	for len(topUps.Items) == 0 {
		if err := c.List(ctx, &topUps, client.InNamespace("acme")); err != nil {
			t.Fatal(err)
		}
	}
	interrupt()
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "interrupted") || strings.Contains(err.Error(), "is the operator running") ||
		!strings.Contains(err.Error(), "applied all the same") || !strings.Contains(err.Error(), topUps.Items[0].Name) {
		t.Errorf("topup interrupted: %v; want it to say it was interrupted and that %s is applied all the same", err, topUps.Items[0].Name)
	}
}

// An account being closed is said to be, and is not credited. Interleaving: 1. an
// administrator closes acme: deletes its PointAccount, which the ledger's finalizer keeps while
// it holds points (docs/ledger.md, Deleting things; the policy that refuses the delete was not
// installed, or the delete came with the namespace's). 2. A colleague, or the same person
// later, runs `account create acme` for the customer, then `topup acme 50 --reference INV-9`
// for their new payment. Before the fix create answered "account "acme" already exists"
// (as if it were open: it takes no task while it closes), and the top-up was created and
// credited to the closing account, where no task can spend it and which it keeps from closing
// until someone debits it again: the customer paid for points they cannot use. Now create says
// the account is being closed, topup refuses a credit to it (a debit, which closes it, still
// goes), and apikey create a key for it (every task of which would be refused).
func TestAClosingAccountIsSaidToBeAndNotCredited(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	startTopUpController(t, ctx, env)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, "--kubeconfig", kubeconfig), &out)
		return out.String(), err
	}
	if _, err := cli("account", "create", "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli("topup", "acme", "100", "--reference", "INV-1"); err != nil {
		t.Fatal(err)
	}
	acct := &videogenv1alpha1.PointAccount{}
	key := client.ObjectKey{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}
	if err := c.Get(ctx, key, acct); err != nil {
		t.Fatal(err)
	}
	// The ledger's finalizer, as the PointAccount controller (not run here) puts it on.
	acct.Finalizers = append(acct.Finalizers, videogenv1alpha1.FinalizerLedger)
	if err := c.Update(ctx, acct); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Get(context.Background(), key, acct); err == nil {
			acct.Finalizers = nil
			_ = c.Update(context.Background(), acct)
		}
	})
	if err := c.Delete(ctx, acct); err != nil { // step 1
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, acct); err != nil || acct.DeletionTimestamp.IsZero() {
		t.Fatalf("the account is not kept closing: %v", err)
	}
	if _, err := cli("account", "create", "acme"); err == nil || !strings.Contains(err.Error(), "being closed") {
		t.Errorf("account create of a closing account: %v; want it said to be closing", err)
	}
	if _, err := cli("apikey", "create", "--account", "acme"); err == nil || !strings.Contains(err.Error(), "being closed") {
		t.Errorf("apikey create for a closing account: %v; want refused, the account being closed", err)
	}
	out, err := cli("topup", "acme", "50", "--reference", "INV-9")
	if err == nil || !strings.Contains(err.Error(), "being closed") {
		t.Errorf("a credit to a closing account: %v\n%s; want refused, the account being closed", err, out)
	}
	var topUps videogenv1alpha1.PointTopUpList
	if err := c.List(ctx, &topUps, client.InNamespace("acme")); err != nil || len(topUps.Items) != 1 {
		t.Errorf("top-ups in acme: %d (%v); want only INV-1", len(topUps.Items), err)
	}
	// The debit that closes it goes.
	if out, err := cli("topup", "acme", "100", "--debit", "--reference", "CLOSE-1", "--note", "closing"); err != nil || !strings.Contains(out, "balance is now 0") {
		t.Errorf("the closing debit: %v\n%s", err, out)
	}
}

// The interleaving TestTopUpInterruptedSaysTheTopUpStands can meet (CI, 2026-11-29): Ctrl-C
// after the create landed and before its answer came. The create's error is then only
// "context canceled", and the read that tells whether the top-up was made must not be cut by
// the same Ctrl-C, or the administrator is told it may not exist while it is being applied.
func TestACreateCutByCtrlCStillFindsTheTopUpItMade(t *testing.T) {
	_, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "acme")
	made := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "topup-landed"},
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 100, Reference: "INV-8"}}
	if err := c.Create(ctx, made); err != nil {
		t.Fatal(err)
	}
	interrupted, cancel := context.WithCancel(ctx)
	cancel()
	asked := &videogenv1alpha1.PointTopUp{ObjectMeta: made.ObjectMeta, Spec: made.Spec}
	if err := createdAllTheSame(interrupted, c, asked, context.Canceled); err != nil {
		t.Fatalf("a top-up made before Ctrl-C cut its create's answer: %v, want it found", err)
	}
	if asked.UID != made.UID {
		t.Fatalf("found UID %q, want the top-up made (%s)", asked.UID, made.UID)
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// The task commands, kubectl's flags (--namespace, --as, -o jsonpath), completions, version and
// the kubectl plugin name, against a real kube-apiserver as a platform administrator.
func TestTaskCommandsAsKubectlUsersExpect(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "videogen-system")
	mustCreateNamespace(t, ctx, c, "acme")
	bindAdminRoles(t, ctx, c, "platform-admin", "videogen-system")
	kubeconfig := func(u envtest.User) string { return kubeconfigFor(t, env, u) }
	asAdmin := kubeconfig(envtest.User{Name: "platform-admin"})
	// A cluster administrator, who may impersonate.
	asRoot := kubeconfig(envtest.User{Name: "root", Groups: []string{"system:masters"}})
	cli := func(kubeconfig string, args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, "--kubeconfig", kubeconfig), &out)
		return out.String(), err
	}

	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-1"},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
			Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}
	if err := c.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	cost := int64(10)
	task.Status = videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskRunning, Cost: &cost, Charge: videogenv1alpha1.ChargeFrozen,
		Progress: 20, Stages: []videogenv1alpha1.StageStatus{{Name: videogenv1alpha1.StageAnalyze, State: videogenv1alpha1.StageRunning,
			Progress: 40, Backend: "reference-worker"}, {Name: videogenv1alpha1.StageRender, State: videogenv1alpha1.StagePending}}}
	if err := c.Status().Update(ctx, task); err != nil {
		t.Fatal(err)
	}

	out, err := cli(asAdmin, "task", "get", "vt-1", "-n", "acme")
	if err != nil || !regexp.MustCompile(`acme\s+vt-1\s+video.eraser\s+running\s+analyze\s+20%\s+10\s+Frozen`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^analyze\s+Running\s+40%\s+reference-worker`).MatchString(out) {
		t.Fatalf("task get: %v\n%s", err, out)
	}
	if out, err := cli(asAdmin, "task", "get", "vt-1", "-n", "acme", "-o", "jsonpath={.status.phase}"); err != nil || out != "Running" {
		t.Errorf("task get -o jsonpath: %q %v", out, err)
	}
	if out, err := cli(asAdmin, "task", "show", "vt-1", "-n", "acme", "-o", "name"); err != nil || out != "videotask.videogen.dev/vt-1\n" {
		t.Errorf("task show (as account show): %q %v", out, err)
	}
	if out, err := cli(asAdmin, "task", "list", "--namespace", "acme", "-o", "name"); err != nil || out != "videotask.videogen.dev/vt-1\n" {
		t.Errorf("task list -o name: %q %v", out, err)
	}
	// --limit 0 is every task, not none.
	if out, err := cli(asAdmin, "task", "list", "-n", "acme", "--limit", "0", "-o", "name"); err != nil || out != "videotask.videogen.dev/vt-1\n" {
		t.Errorf("task list --limit 0: %q %v", out, err)
	}
	// An empty listing is a note on stderr, as kubectl's "No resources found", not a bare header.
	var note bytes.Buffer
	stderr = &note
	t.Cleanup(func() { stderr = os.Stderr })
	if out, err := cli(asAdmin, "task", "list", "-n", "nosuch"); err != nil || out != "" || note.String() != "No tasks found: there is no account \"nosuch\".\n" {
		t.Errorf("task list -n nosuch: %v, printed %q, noted %q", err, out, note.String())
	}
	// Watching an account that does not exist says so at once, as a watch that could not follow.
	watchCtx, stopWatch := context.WithTimeout(ctx, 15*time.Second)
	err = run(watchCtx, []string{"task", "watch", "-n", "nosuch", "--kubeconfig", asAdmin}, io.Discard)
	stopWatch()
	if err == nil || !strings.Contains(err.Error(), `there is no account "nosuch"`) || exitCode(err) != exitWatchFailed {
		t.Errorf("task watch -n nosuch: %v (exit status %d, want %d)", err, exitCode(err), exitWatchFailed)
	}
	if _, err := cli(asAdmin, "task", "get", "vt-1", "-n", "globex"); err == nil || !strings.Contains(err.Error(), `no task "vt-1": there is no account "globex"`) {
		t.Errorf("task get in another account: %v", err)
	}

	// --as: kubectl's impersonation, checked by the kube-apiserver.
	if out, err := cli(asRoot, "task", "list", "--as", "platform-admin"); err != nil || !strings.Contains(out, "vt-1") {
		t.Errorf("task list --as platform-admin: %v\n%s", err, out)
	}
	if _, err := cli(asRoot, "task", "list", "--as", "nobody"); err == nil || !strings.Contains(err.Error(), `"nobody" cannot list`) {
		t.Errorf("task list --as nobody: %v", err)
	}

	// watch NAME follows the task until it ends and exits with its outcome.
	watched := make(chan error, 1)
	var watchOut bytes.Buffer
	go func() {
		watched <- run(ctx, []string{"task", "watch", "vt-1", "-n", "acme", "--kubeconfig", asAdmin}, &watchOut)
	}()
	time.Sleep(500 * time.Millisecond)
	task.Status.Progress, task.Status.Stages[0].Progress = 60, 100
	if err := c.Status().Update(ctx, task); err != nil {
		t.Fatal(err)
	}
	// It does not promise the refund: a stage that finished before the cancel reached it wins.
	if out, err := cli(asAdmin, "task", "cancel", "vt-1", "-n", "acme"); err != nil || !strings.Contains(out, "cancel requested for task vt-1") ||
		!strings.Contains(out, "unless it finishes first") {
		t.Fatalf("task cancel: %v\n%s", err, out)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(task), task); err != nil || task.Annotations[videogenv1alpha1.AnnotationCancelRequested] != "true" {
		t.Fatalf("cancel did not set the annotation: %v %v", err, task.Annotations)
	}
	if out, err := cli(asAdmin, "task", "cancel", "vt-1", "-n", "acme"); err != nil || !strings.Contains(out, "cancel requested for task vt-1") {
		t.Errorf("a retried cancel while the first is under way: %v\n%s", err, out)
	}
	// What the controller does with a cancel request.
	task.Status.Phase, task.Status.Charge = videogenv1alpha1.TaskFailed, videogenv1alpha1.ChargeRefunded
	task.Status.Error = &videogenv1alpha1.TaskError{Code: "canceled", Message: "canceled on request"}
	task.Status.Conditions = []metav1.Condition{{Type: videogenv1alpha1.ConditionFailed, Status: metav1.ConditionTrue,
		Reason: videogenv1alpha1.ReasonCanceled, Message: "canceled on request", LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, task); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-watched:
		if !errors.Is(err, errTaskDidNotSucceed) || !strings.Contains(err.Error(), "canceled on request") || exitCode(err) != 1 {
			t.Errorf("watch of a canceled task ended with %v (exit status %d, want 1)", err, exitCode(err))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("task watch did not end when the task did")
	}
	if rows := regexp.MustCompile(`(?m)^acme\s+vt-1\s`).FindAllString(watchOut.String(), -1); len(rows) != 3 {
		t.Errorf("watch printed %d rows, want 3 (running 20%%, running 60%%, canceled):\n%s", len(rows), watchOut.String())
	}
	if bad := misaligned(watchOut.String()); len(bad) > 0 {
		t.Errorf("watch rows whose columns moved (the canceled row's charge and reason are wider):\n%s\nin\n%s",
			strings.Join(bad, "\n"), watchOut.String())
	}
	if out, err := cli(asAdmin, "task", "cancel", "vt-1", "-n", "acme"); err != nil || out != "task vt-1 is canceled; its points were refunded\n" {
		t.Errorf("a retried cancel of a canceled task: %v, printed %q", err, out)
	}

	// Shell completion of task and account names, from the cluster.
	// (The word being completed comes last, so --kubeconfig goes first.)
	var completed bytes.Buffer
	if err := run(ctx, []string{"__complete", "--kubeconfig", asAdmin, "task", "get", "-n", "acme", ""}, &completed); err != nil ||
		!strings.Contains(completed.String(), "vt-1\n") {
		t.Errorf("completing task names: %v\n%s", err, completed.String())
	}
	if out, err := cli(asAdmin, "completion", "bash"); err != nil || !strings.Contains(out, "__start_videogenctl") {
		t.Errorf("completion bash: %v", err)
	}
	if out, err := cli(asAdmin, "version"); err != nil || !regexp.MustCompile(`(?m)^Client:\s+\S+\nKubernetes:\s+v`).MatchString(out) {
		t.Errorf("version: %v\n%s", err, out)
	}

	// As kubectl's plugin, help and messages say `kubectl videogen`.
	argv0 := os.Args[0]
	os.Args[0] = "/usr/local/bin/kubectl-videogen"
	t.Cleanup(func() { os.Args[0] = argv0 })
	var help bytes.Buffer
	if err := run(ctx, []string{"--help"}, &help); err != nil || !strings.Contains(help.String(), "kubectl videogen [command]") {
		t.Errorf("help as a kubectl plugin: %v\n%s", err, help.String())
	}
}

// A negative --limit is a usage error, not every task.
// An account's user, allowed to read tasks in their namespace only, who lists tasks without -n
// is told to name the account, not only that the cluster scope is forbidden.
func TestTaskListWithoutAccountTellsATenantToNameIt(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "acme")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "tasks-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"videogen.dev"}, Resources: []string{"videotasks"}, Verbs: []string{"get", "list", "watch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "alice-tasks"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}}
	for _, obj := range []client.Object{role, binding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	asAlice := kubeconfigFor(t, env, envtest.User{Name: "alice"})
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, "--kubeconfig", asAlice), &out)
		return out.String(), err
	}
	if _, err := cli("task", "list"); err == nil || !strings.Contains(err.Error(), "videogenctl task list -n ACCOUNT") ||
		!strings.Contains(err.Error(), "forbidden") {
		t.Errorf("task list without -n, as a tenant: %v", err)
	}
	var note bytes.Buffer
	stderr = &note
	t.Cleanup(func() { stderr = os.Stderr })
	if _, err := cli("task", "list", "-n", "acme"); err != nil {
		t.Errorf("task list -n acme, as a tenant: %v", err)
	}
}

func TestTaskListRefusesNegativeLimit(t *testing.T) {
	for _, use := range [][]string{{"task", "list"}, {"tasks"}} {
		args := append(use, "--limit", "-1", "--kubeconfig", filepath.Join(t.TempDir(), "none"))
		var out bytes.Buffer
		if err := run(context.Background(), args, &out); err == nil || !strings.Contains(err.Error(), "--limit must be 0 or more, not -1") {
			t.Errorf("%v: err = %v", args, err)
		}
	}
}

// A cluster that cannot be reached is said in kubectl's words, and `task watch NAME` tells it
// from a task that did not succeed by its exit status (2, not 1), as kubectl diff does.
func TestAnUnreachableClusterIsSaidPlainly(t *testing.T) {
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
	flags := []string{"-n", "acme", "--server", "https://" + addr, "--insecure-skip-tls-verify", "--kubeconfig", kubeconfig}
	for _, tc := range []struct {
		args []string
		exit int
	}{
		{[]string{"task", "list"}, 1},
		{[]string{"task", "watch", "vt-1"}, 2},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append(tc.args, flags...), &out)
		if err == nil || !strings.Contains(err.Error(), "the connection to the server "+addr+" was refused") {
			t.Errorf("%v: %v", tc.args, err)
		}
		if got := exitCode(err); got != tc.exit {
			t.Errorf("%v: exit status %d, want %d", tc.args, got, tc.exit)
		}
	}
}

// task watch of an account lists its tasks oldest first, the newest last, where the changes
// that follow are printed. Before, it printed them as the kube-apiserver lists them, by name:
// for the REST API's random ids, no order at all (here vt-a, created last, came first).
func TestTaskWatchListsAnAccountsTasksOldestFirst(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	mustCreateNamespace(t, ctx, c, "acme")
	if err := c.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"vt-b", "vt-a"} {
		if i > 0 {
			time.Sleep(1100 * time.Millisecond) // creationTimestamp is kept to the second
		}
		task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: name},
			Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
				Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}
		if err := c.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	watchCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(watchCtx, []string{"task", "watch", "-n", "acme", "--kubeconfig", kubeconfig}, &out); err != nil {
		t.Fatalf("task watch -n acme: %v", err)
	}
	if b, a := strings.Index(out.String(), "vt-b"), strings.Index(out.String(), "vt-a"); b < 0 || a < 0 || b > a {
		t.Errorf("task watch -n acme printed\n%s\nwant vt-b (created first) before vt-a", out.String())
	}
}

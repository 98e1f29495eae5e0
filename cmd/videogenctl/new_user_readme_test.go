package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// A new user reads the README and the help, and checks them.

// account show -o json/yaml gives every list as a list. Input: `account create acme`, then
// `account show acme -o json` before the first top-up (every new account, and what a billing
// script reads first). Before the fix "holds" was [] but "recentTopUps" was null, and in YAML
// `recentTopUps: null`: `jq '.recentTopUps[]'` fails ("Cannot iterate over null") and a
// script in a typed language that declares the field an array fails to decode the one account
// that has no top-ups yet. Nothing is out of order: the first command line after account create.
func TestAccountShowListsNoTopUpsAsAnEmptyList(t *testing.T) {
	env, ctx, _ := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, "--kubeconfig", kubeconfig), &out)
		return out.String(), err
	}
	if _, err := cli("account", "create", "acme"); err != nil {
		t.Fatal(err)
	}
	out, err := cli("account", "show", "acme", "-o", "json")
	var shown map[string]any
	if err != nil || json.Unmarshal([]byte(out), &shown) != nil {
		t.Fatalf("account show -o json: %v\n%s", err, out)
	}
	for _, field := range []string{"holds", "recentTopUps"} {
		if list, ok := shown[field].([]any); !ok || len(list) != 0 {
			t.Errorf("account show -o json: %q is %#v, want [] for an account without any\n%s", field, shown[field], out)
		}
	}
	out, err = cli("account", "show", "acme", "-o", "yaml")
	if err != nil || !strings.Contains(out, "holds: []\n") || !strings.Contains(out, "recentTopUps: []\n") {
		t.Errorf("account show -o yaml: %v; want holds: [] and recentTopUps: []\n%s", err, out)
	}
}

// task list is newest first as GET /v1/tasks is, also for tasks created within one second (the
// kube-apiserver keeps creationTimestamp to the second). Input: three tasks vt-1, vt-2, vt-3
// made one after the other with kubectl (a script, a GitOps sync: any burst lands in one
// second), then `task list -n acme --limit 1` to see the latest. Before the fix ties kept the
// kube-apiserver's list order, names ascending: vt-1, vt-2, vt-3, so "--limit 1" showed vt-1,
// the oldest, and the listing disagreed with GET /v1/tasks?limit=1 (ties by id, descending,
// docs/api.md), which shows vt-3. The loop below only makes sure the three share a second (it
// creates them again in the rare case a second boundary fell between them).
func TestTaskListTiesAreNewestFirstAsTheRESTAPI(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	mustCreateNamespace(t, ctx, c, "acme")
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, "--kubeconfig", kubeconfig), &out)
		return out.String(), err
	}
	for attempt := 0; ; attempt++ {
		var made []*videogenv1alpha1.VideoTask
		for _, name := range []string{"vt-1", "vt-2", "vt-3"} {
			task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: name},
				Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
					Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}
			if err := c.Create(ctx, task); err != nil {
				t.Fatal(err)
			}
			made = append(made, task)
		}
		if made[0].CreationTimestamp.Equal(&made[2].CreationTimestamp) {
			break
		}
		if attempt == 5 {
			t.Fatal("could not create three tasks within one second")
		}
		for _, task := range made {
			if err := c.Delete(ctx, task); err != nil {
				t.Fatal(err)
			}
		}
		// Gone before they are made again (no finalizer: nothing ran them).
		for _, task := range made {
			for c.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{}) == nil {
			}
		}
	}
	out, err := cli("task", "list", "-n", "acme", "--limit", "1")
	if err != nil || !regexp.MustCompile(`(?m)^acme\s+vt-3\s`).MatchString(out) {
		t.Errorf("task list --limit 1 of vt-1, vt-2, vt-3 made in one second: %v; want vt-3, as GET /v1/tasks?limit=1\n%s", err, out)
	}
	out, err = cli("task", "list", "-n", "acme", "-o", "name")
	if want := "videotask.videogen.dev/vt-3\nvideotask.videogen.dev/vt-2\nvideotask.videogen.dev/vt-1\n"; err != nil || out != want {
		t.Errorf("task list -o name: %v\n%s\nwant\n%s", err, out, want)
	}
}

// A tenant told to name their account is told the command they run. Input: alice, who may
// read tasks in acme only, runs `kubectl videogen task list` and `kubectl videogen task watch`
// without -n (the README's commands, as the kubectl plugin). Before the fix task list's hint
// said "videogenctl task list -n ACCOUNT" (a command alice does not have: she installed the
// plugin) and task watch said only the kube-apiserver's "cannot list resource videotasks ...
// at the cluster scope", with no hint at all.
func TestTenantWithoutNamespaceIsToldTheCommandAsCalled(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "acme")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "tasks-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"videogen.dev"}, Resources: []string{"videotasks", "pointaccounts"}, Verbs: []string{"get", "list", "watch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "alice-tasks"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}}
	for _, obj := range []client.Object{role, binding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	asAlice := kubeconfigFor(t, env, envtest.User{Name: "alice"})
	argv0 := os.Args[0]
	os.Args[0] = "/usr/local/bin/kubectl-videogen"
	t.Cleanup(func() { os.Args[0] = argv0 })
	for _, tc := range []struct {
		args []string
		hint string
	}{
		{[]string{"task", "list"}, "kubectl videogen task list -n ACCOUNT"},
		{[]string{"tasks"}, "kubectl videogen task list -n ACCOUNT"},
		{[]string{"task", "watch"}, "kubectl videogen task watch -n ACCOUNT"},
	} {
		var out bytes.Buffer
		err := run(ctx, append(tc.args, "--kubeconfig", asAlice), &out)
		if err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), tc.hint) ||
			strings.Contains(err.Error(), "videogenctl") {
			t.Errorf("%v as a tenant, as the kubectl plugin: %v; want the kube-apiserver's refusal and %q", tc.args, err, tc.hint)
		}
	}
}

// topup does not say "credited" of a top-up the operator never credited. Interleaving: 1. the
// administrator runs `topup acme 100 --reference INV-9`; the CLI creates the PointTopUp and
// waits. 2. The operator has not applied it yet (a manager failover; here no manager runs), and
// a second administrator marks it applied by hand, as the ledger's TestAHandSetAppliedAtCountsTheSameOnEveryManager describes
// (`kubectl patch pointtopup … --subresource=status -p '{"status":{"appliedAt":"…"}}'`: "the
// customer paid at the desk, mark it done"); the kube-apiserver takes appliedAt alone, and the
// ledger never credits a top-up whose status says applied. 3. The CLI's next read sees
// appliedAt. Before the fix it took appliedAt for the operator's credit and dereferenced
// balanceAfter, which only the operator writes: a nil pointer panic, a Go stack trace and exit
// status 2 for a top-up that moved no point. (Had it not panicked it would have printed
// "credited 100 points to acme", which is false: credited is unchanged.) Now it fails with
// exit status 1, saying that the status was written without the operator's credit.
func TestTopUpMarkedAppliedByHandIsNotCalledCredited(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	var out bytes.Buffer
	if err := run(ctx, []string{"account", "create", "acme", "--kubeconfig", kubeconfig}, &out); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- errors.New("panic: " + strings.SplitN(fmt.Sprint(r), "\n", 2)[0])
			}
		}()
		done <- run(ctx, []string{"topup", "acme", "100", "--reference", "INV-9", "--kubeconfig", kubeconfig}, &out)
	}()
	// Step 2, once the CLI's top-up exists (nothing applies it: no manager runs).
	var topUps videogenv1alpha1.PointTopUpList
	for len(topUps.Items) == 0 {
		if err := c.List(ctx, &topUps, client.InNamespace("acme")); err != nil {
			t.Fatal(err)
		}
	}
	tu := &topUps.Items[0]
	tu.Status.AppliedAt = &metav1.Time{Time: time.Now()}
	if err := c.Status().Update(ctx, tu); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if err == nil || strings.HasPrefix(err.Error(), "panic") || !strings.Contains(err.Error(), "not credited") || exitCode(err) != 1 {
		t.Errorf("topup of a top-up marked applied by hand: %v (exit %d)\n%s; want exit 1 saying the operator did not credit it", err, exitCode(err), out.String())
	}
	if strings.Contains(out.String(), "credited 100") {
		t.Errorf("topup says %q of a top-up nobody credited", out.String())
	}
}

// task watch NAME ends when the task is gone, also when it went while no watch was open.
// Interleaving: 1. `task watch vt-1 -n acme` (running): the CLI lists it and opens a watch.
// 2. The kube-apiserver ends the watch, as it ends every watch after its timeout
// (--min-request-timeout, 30 to 60 minutes) or on a restart. 3. Before the CLI lists again,
// the task is deleted (`kubectl delete videotask`, a namespace deleted): its Deleted event
// belongs to no watch. 4. The CLI lists again: no task. Before the fix it opened a new watch on
// the empty listing and waited for a task that can never change again: `task watch` (and the
// script around it, which the README tells to wait on its exit status) hung until killed. Now
// it says the task was deleted, exit status 1 (TestWatchOfADeletedRunningTaskSaysItDidNotSucceed: a task deleted before it ended did not
// succeed, as one that failed; it was 2 here), as when the deletion comes through a watch. The
// proxy below plays step 2 and 3 on the first watch; a second watch request is the hang.
func TestTaskWatchEndsWhenTheTaskWentBetweenWatches(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "acme")
	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-1"},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
			Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}
	if err := c.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	var watches atomic.Int32
	rewatched := make(chan struct{})
	flags := kubeProxy(t, env, func(w http.ResponseWriter, r *http.Request, proxy http.Handler) {
		if r.URL.Query().Get("watch") == "true" && strings.Contains(r.URL.Path, "/namespaces/acme/videotasks") {
			switch watches.Add(1) {
			case 1: // steps 2 and 3: the task deleted (no finalizer: gone at once), the watch ended
				if err := c.Delete(context.Background(), task); err != nil {
					t.Error(err)
				}
				for c.Get(context.Background(), client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{}) == nil {
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
	go func() {
		var out bytes.Buffer
		done <- run(watchCtx, append([]string{"task", "watch", "vt-1", "-n", "acme"}, flags...), &out)
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "task vt-1 was deleted") || exitCode(err) != 1 {
			t.Errorf("task watch of a task deleted between two watches: %v (exit %d); want \"task vt-1 was deleted\", exit 1", err, exitCode(err))
		}
	case <-rewatched:
		cancel()
		err := <-done
		t.Errorf("task watch listed no vt-1 after the task was deleted and opened another watch, which nothing will ever end (%v when interrupted)", err)
	}
}

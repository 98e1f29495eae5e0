package main

import (
	"bytes"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// task get, watch NAME and cancel say why they found no task: the namespace is no account (a
// typo in -n, or, without -n, the kubeconfig's namespace, "default" unless its context names
// one), or the account has no task of that name. Without -n they say that the namespace is the
// kubeconfig's and to name the task's account with -n. Before, `task get vt-1` without -n said
// `no task "vt-1" in account "default"`, though "default" is no account; task list -n nosuch
// already said `there is no account "nosuch"`.
func TestTaskNotFoundSaysWhetherTheNamespaceIsAnAccount(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "acme")
	if err := c.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}); err != nil {
		t.Fatal(err)
	}
	asRoot := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	// The same administrator, with a kubeconfig whose context names acme.
	inAcme := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	cfg, err := clientcmd.LoadFromFile(inAcme)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Contexts[cfg.CurrentContext].Namespace = "acme"
	if err := clientcmd.WriteToFile(*cfg, inAcme); err != nil {
		t.Fatal(err)
	}
	// alice may read acme's tasks and account, bob acme's tasks only.
	for user, resources := range map[string][]string{"alice": {"videotasks", "pointaccounts"}, "bob": {"videotasks"}} {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: user},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"videogen.dev"}, Resources: resources, Verbs: []string{"get", "list", "watch"}}}}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: user},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}}
		for _, obj := range []client.Object{role, binding} {
			if err := c.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
	}
	asAlice := kubeconfigFor(t, env, envtest.User{Name: "alice"})
	asBob := kubeconfigFor(t, env, envtest.User{Name: "bob"})

	const kubeconfigsDefault = `"default" is the kubeconfig's namespace, as no -n was given: name the task's account with -n ACCOUNT`
	for _, tc := range []struct {
		kubeconfig string
		args       []string
		want       string
	}{
		{asRoot, []string{"task", "get", "vt-1"},
			`no task "vt-1": there is no account "default"; ` + kubeconfigsDefault},
		{asRoot, []string{"task", "show", "vt-1"},
			`no task "vt-1": there is no account "default"; ` + kubeconfigsDefault},
		{asRoot, []string{"task", "watch", "vt-1"},
			`no task "vt-1": there is no account "default"; ` + kubeconfigsDefault},
		{asRoot, []string{"task", "cancel", "vt-1"},
			`no task "vt-1": there is no account "default"; ` + kubeconfigsDefault},
		{asRoot, []string{"task", "get", "vt-1", "-n", "nosuch"},
			`no task "vt-1": there is no account "nosuch"`},
		{asRoot, []string{"task", "cancel", "vt-1", "--namespace", "nosuch"},
			`no task "vt-1": there is no account "nosuch"`},
		{asRoot, []string{"task", "get", "vt-1", "-n", "acme"},
			`no task "vt-1" in account "acme" (-n ACCOUNT names another)`},
		{asRoot, []string{"task", "watch", "vt-1", "-n", "acme"},
			`no task "vt-1" in account "acme" (-n ACCOUNT names another)`},
		{inAcme, []string{"task", "get", "vt-1"},
			`no task "vt-1" in account "acme"; "acme" is the kubeconfig's namespace, as no -n was given: name the task's account with -n ACCOUNT`},
		{inAcme, []string{"task", "cancel", "vt-1"},
			`no task "vt-1" in account "acme"; "acme" is the kubeconfig's namespace, as no -n was given: name the task's account with -n ACCOUNT`},
		{asAlice, []string{"task", "get", "vt-1", "-n", "acme"},
			`no task "vt-1" in account "acme" (-n ACCOUNT names another)`},
		// bob may not read the account: the CLI does not claim there is none.
		{asBob, []string{"task", "get", "vt-1", "-n", "acme"},
			`no task "vt-1" in namespace "acme" (-n ACCOUNT names another)`},
		// alice's roles are in acme only: the kube-apiserver's refusal in "default", and the hint.
		{asAlice, []string{"task", "get", "vt-1"},
			`videotasks.videogen.dev "vt-1" is forbidden: User "alice" cannot get resource "videotasks" in API group "videogen.dev" in the namespace "default"; ` + kubeconfigsDefault},
	} {
		var out bytes.Buffer
		err := run(ctx, append(tc.args, "--kubeconfig", tc.kubeconfig), &out)
		if err == nil || err.Error() != tc.want || out.Len() != 0 {
			t.Errorf("%v:\n got %v (printed %q)\nwant %s", tc.args, err, out.String(), tc.want)
		}
		// task watch NAME: a task it cannot follow is exit status 2, not the answer 1.
		if tc.args[1] == "watch" && exitCode(err) != exitWatchFailed {
			t.Errorf("%v: exit status %d, want %d", tc.args, exitCode(err), exitWatchFailed)
		}
	}
}

package manifests

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// Every role is named videogen-<what> once the prefix is applied (never videogen-videogen-…), and
// every binding refers to a role of the render.
func TestRoleNamesAreConsistent(t *testing.T) {
	roles := map[string]bool{}
	objs := renderFrom(t, "config/default")
	for _, u := range objs {
		if k := u.GetKind(); k == "Role" || k == "ClusterRole" {
			roles[k+"/"+u.GetName()] = true
			if !strings.HasPrefix(u.GetName(), "videogen-") || strings.Contains(u.GetName(), "videogen-videogen") {
				t.Errorf("%s %s: want one videogen- prefix", k, u.GetName())
			}
		}
	}
	for _, u := range objs {
		if k := u.GetKind(); k == "RoleBinding" || k == "ClusterRoleBinding" {
			ref := as[rbacv1.RoleBinding](t, u).RoleRef
			if !roles[ref.Kind+"/"+ref.Name] {
				t.Errorf("%s %s binds %s %s, which the render does not create", k, u.GetName(), ref.Kind, ref.Name)
			}
		}
	}
}

// A namespace's users get videogen's tenant kinds through the built-in admin, edit and view
// roles, as with Deployments: edit runs tasks and reads points, nobody but the platform team
// mints points or reads PaymentEvents, and the cluster-scoped catalog has a role of its own.
func TestBuiltInRolesCoverTheTenantKinds(t *testing.T) {
	objs := renderFrom(t, "config/default")
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	env.CRDDirectoryPaths = nil // authorization does not need the CRDs
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, u := range objs {
		switch u.GetKind() {
		case "Namespace", "ClusterRole", "Role":
			if err := c.Create(ctx, u.DeepCopy()); err != nil {
				t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	}
	if err := aggregateClusterRoles(ctx, c); err != nil {
		t.Fatal(err)
	}
	const ns, other = "acme", "globex"
	for _, name := range []string{ns, other} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	bind := func(user, clusterRole string, namespaced bool) {
		subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole}
		var obj client.Object = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-" + clusterRole}, Subjects: subjects, RoleRef: ref}
		if namespaced {
			obj = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + clusterRole}, Subjects: subjects, RoleRef: ref}
		}
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	bind("ann-admin", "admin", true)
	bind("ed-edit", "edit", true)
	bind("vi-view", "view", true)
	bind("bo-videogen-edit", "videogen-edit", true)
	bind("bo-videogen-edit", "videogen-view", true)
	bind("cat-reader", "videogen-catalog-reader", false)

	type check struct {
		user, verb, resource, sub, namespace string
		allowed                              bool
	}
	for _, k := range []check{
		// The built-in edit role runs tasks and manages short templates in its namespace only.
		{"ed-edit", "create", "videotasks", "", ns, true},
		{"ed-edit", "patch", "videotasks", "", ns, true}, // cancel: an annotation
		{"ed-edit", "delete", "videotasks", "", ns, true},
		{"ed-edit", "watch", "videotasks", "", ns, true},
		{"ed-edit", "update", "shorttemplates", "", ns, true},
		{"ed-edit", "create", "videotasks", "", other, false},
		// Points are read-only for every tenant, whatever their role in the namespace.
		{"ed-edit", "get", "pointaccounts", "", ns, true},
		{"ed-edit", "list", "pointtopups", "", ns, true},
		{"ed-edit", "update", "pointaccounts", "", ns, false},
		{"ed-edit", "create", "pointtopups", "", ns, false},
		{"ed-edit", "update", "videotasks", "status", ns, false},
		{"ann-admin", "create", "videotasks", "", ns, true},
		{"ann-admin", "create", "pointtopups", "", ns, false},
		{"ann-admin", "patch", "pointaccounts", "status", ns, false},
		{"ann-admin", "delete", "pointaccounts", "", ns, false},
		// view watches and never changes.
		{"vi-view", "list", "videotasks", "", ns, true},
		{"vi-view", "get", "shorttemplates", "", ns, true},
		{"vi-view", "get", "pointaccounts", "", ns, true},
		{"vi-view", "create", "videotasks", "", ns, false},
		{"vi-view", "patch", "videotasks", "", ns, false},
		// PaymentEvents are for the platform team only.
		{"vi-view", "list", "paymentevents", "", ns, false},
		{"ed-edit", "get", "paymentevents", "", ns, false},
		{"ann-admin", "list", "paymentevents", "", ns, false},
		// The videogen roles work on their own, without the built-in ones.
		{"bo-videogen-edit", "create", "videotasks", "", ns, true},
		{"bo-videogen-edit", "get", "pointaccounts", "", ns, true},
		{"bo-videogen-edit", "get", "paymentevents", "", ns, false},
		// The cluster-scoped catalog.
		{"cat-reader", "list", "templates", "", "", true},
		{"cat-reader", "update", "templates", "", "", false},
		{"cat-reader", "list", "videotasks", "", ns, false},
		{"ed-edit", "list", "templates", "", "", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: k.user, Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: k.namespace, Verb: k.verb, Group: "videogen.dev", Resource: k.resource, Subresource: k.sub,
			},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != k.allowed {
			t.Errorf("%s %s %s/%s in %q: allowed=%v, want %v", k.user, k.verb, k.resource, k.sub, k.namespace, sar.Status.Allowed, k.allowed)
		}
	}

	// A platform administrator bound as docs/deploy.md says (videogen-platform-admin, and
	// videogen-platform-admin-keys in the operator's namespace) reads the PaymentEvents there and
	// asks for a redelivery (an annotation), as the README and the alerts' runbook tell them to;
	// no account's namespace is opened by it.
	const system = "videogen-system"
	pat := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "pat-platform"}}
	for _, obj := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pat-platform-admin"}, Subjects: pat,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "videogen-platform-admin"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: "pat-platform-keys"}, Subjects: pat,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "videogen-platform-admin-keys"}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// The authorizer sees bindings through its informer: wait until it sees these two, or a
	// check below may be answered before they count.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "pat-platform", Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: system, Verb: "list", Group: "videogen.dev", Resource: "paymentevents"},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		sarPat := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "pat-platform", Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "videogen.dev", Resource: "pointtopups"},
		}}
		if err := c.Create(ctx, sarPat); err != nil {
			t.Fatal(err)
		}
		if (sar.Status.Allowed && sarPat.Status.Allowed) || time.Now().After(deadline) {
			break
		}
	}
	for _, k := range []struct {
		verb, resource, namespace string
		allowed                   bool
	}{
		{"list", "paymentevents", system, true},
		{"get", "paymentevents", system, true},
		{"watch", "paymentevents", system, true},
		{"patch", "paymentevents", system, true}, // videogen.dev/redeliver
		{"delete", "paymentevents", system, false},
		{"update", "paymentevents", system, false},
		{"list", "paymentevents", ns, false},
		{"create", "pointtopups", ns, true},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "pat-platform", Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: k.namespace, Verb: k.verb, Group: "videogen.dev", Resource: k.resource,
			},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != k.allowed {
			t.Errorf("platform admin %s %s in %q: allowed=%v, want %v", k.verb, k.resource, k.namespace, sar.Status.Allowed, k.allowed)
		}
	}

	// docs/deploy.md gives an account's users videogen-edit and videogen-view alone where the Job
	// backend runs stages in their namespace: those reach none of the namespace's Secrets, Pods
	// or Jobs (the built-in edit does, which is why it is not enough there).
	for _, k := range []struct {
		user, verb, group, resource, sub string
		allowed                          bool
	}{
		{"bo-videogen-edit", "get", "", "secrets", "", false},
		{"bo-videogen-edit", "create", "", "pods", "exec", false},
		{"bo-videogen-edit", "get", "", "pods", "", false},
		{"bo-videogen-edit", "delete", "batch", "jobs", "", false},
		// Checked, holds: the Job backend names a stage's Job after its
		// work key (JobName; the task's UID is in it, visible to any reader of the task) and
		// adopts a Job already there under that name (Submit: AlreadyExists). One who could
		// create it first, or a pod with its Job's labels, would choose the stage's result. With
		// videogen-edit neither is possible; the built-in edit can, in its own namespace only,
		// against its own tasks (docs/deploy.md says what else edit can do there).
		{"bo-videogen-edit", "create", "batch", "jobs", "", false},
		{"bo-videogen-edit", "create", "", "pods", "", false},
		{"bo-videogen-edit", "impersonate", "", "serviceaccounts", "", false},
		{"ed-edit", "get", "", "secrets", "", true},
		{"ed-edit", "delete", "batch", "jobs", "", true},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: k.user, Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: k.verb, Group: k.group, Resource: k.resource, Subresource: k.sub,
			},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != k.allowed {
			t.Errorf("%s %s %s/%s (%q) in %q: allowed=%v, want %v", k.user, k.verb, k.resource, k.sub, k.group, ns, sar.Status.Allowed, k.allowed)
		}
	}
}

// aggregateClusterRoles does what kube-controller-manager's clusterrole-aggregation controller
// does, which envtest does not run: every ClusterRole with an aggregationRule gets the rules of
// the ClusterRoles its selectors match, until nothing changes (admin aggregates edit, which is
// itself aggregated).
func aggregateClusterRoles(ctx context.Context, c client.Client) error {
	var list rbacv1.ClusterRoleList
	if err := c.List(ctx, &list); err != nil {
		return err
	}
	for changed := true; changed; {
		changed = false
		for i := range list.Items {
			role := &list.Items[i]
			if role.AggregationRule == nil {
				continue
			}
			var rules []rbacv1.PolicyRule
			for _, s := range role.AggregationRule.ClusterRoleSelectors {
				sel, err := metav1.LabelSelectorAsSelector(&s)
				if err != nil {
					return err
				}
				for _, o := range list.Items {
					if o.Name != role.Name && sel.Matches(labels.Set(o.Labels)) {
						rules = append(rules, o.Rules...)
					}
				}
			}
			if !reflect.DeepEqual(rules, role.Rules) {
				role.Rules, changed = rules, true
			}
		}
	}
	for i := range list.Items {
		if list.Items[i].AggregationRule != nil {
			if err := c.Update(ctx, &list.Items[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

package manifests

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/videogen-dev/videogen-operator/internal/localstack"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// rendered is config/default as objects of their own types.
type rendered struct {
	deployments []appsv1.Deployment
	services    map[string]corev1.Service
	policies    []networkingv1.NetworkPolicy
	ingresses   []networkingv1.Ingress
	roles       map[string]rbacv1.Role
	bindings    []rbacv1.RoleBinding
}

func renderDefault(t *testing.T) rendered {
	t.Helper()
	r := rendered{services: map[string]corev1.Service{}, roles: map[string]rbacv1.Role{}}
	for _, u := range renderFrom(t, "config/default") {
		switch u.GetKind() {
		case "Deployment":
			r.deployments = append(r.deployments, as[appsv1.Deployment](t, u))
		case "Service":
			r.services[u.GetName()] = as[corev1.Service](t, u)
		case "NetworkPolicy":
			r.policies = append(r.policies, as[networkingv1.NetworkPolicy](t, u))
		case "Ingress":
			r.ingresses = append(r.ingresses, as[networkingv1.Ingress](t, u))
		case "Role":
			r.roles[u.GetName()] = as[rbacv1.Role](t, u)
		case "RoleBinding":
			r.bindings = append(r.bindings, as[rbacv1.RoleBinding](t, u))
		}
	}
	return r
}

func as[T any](t *testing.T, u *unstructured.Unstructured) T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// Every NetworkPolicy selects pods that exist and opens ports that a container of theirs names;
// a policy selecting nothing, or a port name nobody has, fails open or closed without a word.
func TestNetworkPoliciesSelectRealPodsAndPorts(t *testing.T) {
	r := renderDefault(t)
	if len(r.policies) == 0 {
		t.Fatal("no NetworkPolicy rendered")
	}
	for _, p := range r.policies {
		sel, err := metav1LabelSelector(p)
		if err != nil {
			t.Fatal(err)
		}
		var pods []corev1.PodSpec
		for _, d := range r.deployments {
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				pods = append(pods, d.Spec.Template.Spec)
			}
		}
		if len(pods) == 0 {
			t.Errorf("NetworkPolicy %s selects no pod of the render", p.Name)
			continue
		}
		for _, rule := range p.Spec.Ingress {
			for _, port := range rule.Ports {
				if port.Port == nil || !podsExpose(pods, port.Port.String()) {
					t.Errorf("NetworkPolicy %s allows port %v, which no selected container exposes", p.Name, port.Port)
				}
			}
		}
	}
}

// The Ingress exposes the payment webhook route only, on the Service that reaches the apiserver.
func TestIngressExposesOnlyTheWebhookRoute(t *testing.T) {
	r := renderDefault(t)
	if len(r.ingresses) != 1 {
		t.Fatalf("want one Ingress, got %d", len(r.ingresses))
	}
	for _, rule := range r.ingresses[0].Spec.Rules {
		for _, path := range rule.HTTP.Paths {
			if path.Path != "/v1/webhooks/" || *path.PathType != networkingv1.PathTypePrefix {
				t.Errorf("Ingress path %s (%s): only the /v1/webhooks/ prefix may be exposed", path.Path, *path.PathType)
			}
			svc, ok := r.services[path.Backend.Service.Name]
			if !ok {
				t.Fatalf("Ingress backend %s is not a Service of the render", path.Backend.Service.Name)
			}
			var target string
			for _, sp := range svc.Spec.Ports {
				if sp.Name == path.Backend.Service.Port.Name {
					target = sp.TargetPort.String()
				}
			}
			if target != "api" {
				t.Errorf("Ingress reaches %s port %q, whose target is %q, not the apiserver's api port", svc.Name, path.Backend.Service.Port.Name, target)
			}
		}
	}
}

// The manager elects a leader, and its service account may hold the lease.
func TestManagerElectsALeader(t *testing.T) {
	r := renderDefault(t)
	for _, d := range r.deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name != "manager" {
				continue
			}
			if !slices.Contains(c.Args, "--leader-elect") {
				t.Errorf("the manager runs without --leader-elect: %v", c.Args)
			}
			sa := d.Spec.Template.Spec.ServiceAccountName
			if !canUseLeases(r, d.Namespace, sa) {
				t.Errorf("service account %s may not get, create and update leases in %s", sa, d.Namespace)
			}
			return
		}
	}
	t.Fatal("no manager container in the render")
}

// The kind cluster renders the demo media from its own copy of the local stack's recipes
// (config/e2e/make-demo-media.sh); every blob that config/e2e/demo and hack/kind-e2e.sh name
// must be one that script writes, under the local stack's name for the same recipe.
func TestKindDemoMediaMatchTheLocalStack(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	// One command per line: join the lines a backslash continues.
	script := strings.ReplaceAll(read(t, filepath.Join(root, "config/e2e/make-demo-media.sh")), "\\\n", " ")
	written := map[string]bool{}
	for _, recipe := range localstack.DemoMedia() {
		name := localstack.DemoBlobName(recipe)
		line := regexp.MustCompile(`(?m)^render ` + regexp.QuoteMeta(name) + ` .*# ` + regexp.QuoteMeta(recipe) + `$`)
		if !line.MatchString(script) {
			t.Errorf("make-demo-media.sh does not render %s as %s", recipe, name)
		}
		written[name] = true
	}
	blob := regexp.MustCompile(`/v1/blobs/([0-9a-f]{32}\.[a-z0-9]+)`)
	for _, file := range []string{"config/e2e/demo/templates.yaml", "hack/kind-e2e.sh"} {
		refs := blob.FindAllStringSubmatch(read(t, filepath.Join(root, file)), -1)
		if len(refs) == 0 {
			t.Errorf("%s names no demo blob", file)
		}
		for _, m := range refs {
			if !written[m[1]] {
				t.Errorf("%s names blob %s, which make-demo-media.sh does not write", file, m[1])
			}
		}
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func podsExpose(pods []corev1.PodSpec, port string) bool {
	for _, p := range pods {
		for _, c := range p.Containers {
			for _, cp := range c.Ports {
				if cp.Name == port || strings.TrimSpace(port) == itoa(cp.ContainerPort) {
					return true
				}
			}
		}
	}
	return false
}

func metav1LabelSelector(p networkingv1.NetworkPolicy) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// canUseLeases says whether a Role bound to service account sa in ns grants what leader
// election does with leases.
func canUseLeases(r rendered, ns, sa string) bool {
	for _, b := range r.bindings {
		if b.Namespace != ns || b.RoleRef.Kind != "Role" {
			continue
		}
		bound := false
		for _, s := range b.Subjects {
			bound = bound || s.Kind == rbacv1.ServiceAccountKind && s.Name == sa
		}
		if !bound {
			continue
		}
		for _, rule := range r.roles[b.RoleRef.Name].Rules {
			if slices.Contains(rule.APIGroups, "coordination.k8s.io") && slices.Contains(rule.Resources, "leases") &&
				slices.Contains(rule.Verbs, "get") && slices.Contains(rule.Verbs, "create") && slices.Contains(rule.Verbs, "update") {
				return true
			}
		}
	}
	return false
}

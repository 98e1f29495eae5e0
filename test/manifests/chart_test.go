package manifests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// The Helm chart installs what kustomize installs: for its defaults, the objects of
// config/default (config/prometheus with monitoring on), less the Namespace, which
// `helm install --create-namespace` makes. A change to config/ that the chart does not follow
// (a new flag, a new role) fails here with a diff per object: "-" is kustomize, "+" the chart.
func TestChartRendersWhatKustomizeDoes(t *testing.T) {
	for _, c := range []struct {
		dir string
		set []string
	}{
		{"config/default", nil},
		{"config/prometheus", []string{"metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true"}},
	} {
		t.Run(c.dir, func(t *testing.T) {
			want := byKey(t, renderFrom(t, c.dir))
			got := byKey(t, renderChart(t, "videogen-system", c.set...))
			for _, key := range sortedKeys(want, got) {
				w, inKustomize := want[key]
				g, inChart := got[key]
				switch {
				case !inChart:
					t.Errorf("%s: kustomize renders it, the chart does not", key)
				case !inKustomize:
					t.Errorf("%s: the chart renders it, kustomize does not", key)
				default:
					if diff := cmp.Diff(w, g); diff != "" {
						t.Errorf("%s differs (-kustomize +chart):\n%s", key, diff)
					}
				}
			}
		})
	}
}

// With another prefix and namespace, every name the chart's objects use to find each other
// follows: Service URLs, bindings, the token Secret's account.
func TestChartFollowsItsPrefixAndNamespace(t *testing.T) {
	objs := renderChart(t, "media", "fullnameOverride=vg")
	names := map[string]bool{}
	for _, u := range objs {
		names[u.GetKind()+"/"+u.GetName()] = true
		if !strings.HasPrefix(u.GetName(), "vg-") && u.GetKind() != "CustomResourceDefinition" {
			t.Errorf("%s %s: not named vg-…", u.GetKind(), u.GetName())
		}
		if ns := u.GetNamespace(); ns != "" && ns != "media" {
			t.Errorf("%s %s is in namespace %s, not the release's", u.GetKind(), u.GetName(), ns)
		}
		for _, s := range subjects(u) {
			if s["kind"] == "ServiceAccount" && (s["namespace"] != "media" || !strings.HasPrefix(fmt.Sprint(s["name"]), "vg-")) {
				t.Errorf("%s %s binds service account %v/%v", u.GetKind(), u.GetName(), s["namespace"], s["name"])
			}
		}
	}
	for _, u := range objs {
		if ref, ok, _ := unstructured.NestedStringMap(u.Object, "roleRef"); ok && !names[ref["kind"]+"/"+ref["name"]] {
			t.Errorf("%s %s binds %s %s, which the chart does not render", u.GetKind(), u.GetName(), ref["kind"], ref["name"])
		}
		if sa := u.GetAnnotations()["kubernetes.io/service-account.name"]; sa != "" && !names["ServiceAccount/"+sa] {
			t.Errorf("Secret %s is a token of %s, which the chart does not render", u.GetName(), sa)
		}
	}
	checkBackendsAndURLs(t, objs)
}

// helmBinary is bin/helm, or skips the test without it (make verify-chart builds it; a fresh
// clone has none, and `go test ./test/manifests/` then checks what needs no Helm).
func helmBinary(t *testing.T) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm := filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Skip("bin/helm is missing (make verify-chart builds it)")
	}
	return helm
}

// renderChart runs `helm template` on the chart with --set values.
func renderChart(t *testing.T, namespace string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm := helmBinary(t)
	args := []string{"template", "videogen", filepath.Join(root, "charts", "videogen-operator"), "--namespace", namespace}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return run(t, exec.Command(helm, args...))
}

// Labels and annotations that say who installed an object, not what it is.
var bookkeeping = []string{"app.kubernetes.io/managed-by", "app.kubernetes.io/part-of", "app.kubernetes.io/name",
	"app.kubernetes.io/instance", "app.kubernetes.io/version", "helm.sh/chart", "helm.sh/resource-policy"}

// byKey indexes objects by kind, namespace and name, without what only one installer adds:
// the Namespace object, bookkeeping labels and annotations on the object itself (selectors and
// pod labels are compared), the chart's checksum annotations that restart pods; and with the
// backends file compared as YAML, since its comments differ.
func byKey(t *testing.T, objs []*unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, u := range objs {
		if u.GetKind() == "Namespace" {
			continue
		}
		u = u.DeepCopy()
		for _, field := range []string{"labels", "annotations"} {
			m, _, _ := unstructured.NestedStringMap(u.Object, "metadata", field)
			for _, k := range bookkeeping {
				delete(m, k)
			}
			if len(m) == 0 {
				unstructured.RemoveNestedField(u.Object, "metadata", field)
			} else {
				_ = unstructured.SetNestedStringMap(u.Object, m, "metadata", field)
			}
		}
		if pod, ok, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "annotations"); ok {
			for k := range pod {
				if strings.HasPrefix(k, "checksum/") {
					delete(pod, k)
				}
			}
			_ = unstructured.SetNestedStringMap(u.Object, pod, "spec", "template", "metadata", "annotations")
		}
		if raw, ok, _ := unstructured.NestedString(u.Object, "data", "backends.yaml"); ok {
			var parsed any
			if err := yaml.Unmarshal([]byte(raw), &parsed); err != nil {
				t.Fatalf("ConfigMap %s: backends.yaml: %v", u.GetName(), err)
			}
			u.Object["data"].(map[string]any)["backends.yaml"] = parsed
		}
		key := fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
		if _, dup := out[key]; dup {
			t.Errorf("%s is rendered twice", key)
		}
		out[key] = u.Object
	}
	return out
}

func sortedKeys(maps ...map[string]map[string]any) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range maps {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

func subjects(u *unstructured.Unstructured) []map[string]any {
	list, _, _ := unstructured.NestedSlice(u.Object, "subjects")
	var out []map[string]any
	for _, s := range list {
		if m, ok := s.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// Command holdformats measures what one kube-apiserver status update costs with the same
// 1,404 holds written in different shapes, side by side on one control plane. It is how the
// PointAccount's holds got their shape (docs/benchmarks.md, "Hold formats"). Each shape is a
// throwaway CRD (group expt.videogen.dev) with only status.balance and status.holds.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/videogen-dev/videogen-operator/hack/bench/internal/harness"
)

// format is one shape of the holds: its schema and its value for the given task names.
type format struct {
	kind, what string
	schema     apiextensionsv1.JSONSchemaProps
	value      func(tasks []string) any
}

var (
	integer = apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int64"}
	str     = apiextensionsv1.JSONSchemaProps{Type: "string"}
	formats = []format{
		{"ObjectList", "list of {task, amount, frozenAt} objects, listType=map (the first shape)",
			apiextensionsv1.JSONSchemaProps{Type: "array", XListType: ptr.To("map"), XListMapKeys: []string{"task"},
				Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"task", "amount", "frozenAt"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"task": str, "amount": integer, "frozenAt": {Type: "string", Format: "date-time"}}}}},
			func(tasks []string) any {
				l := make([]any, 0, len(tasks))
				for _, t := range tasks {
					l = append(l, map[string]any{"task": t, "amount": int64(10), "frozenAt": "2026-11-22T02:00:00Z"})
				}
				return l
			}},
		{"AtomicMap", "map of task to points, mapType=atomic (the second shape)",
			apiextensionsv1.JSONSchemaProps{Type: "object", XMapType: ptr.To("atomic"), AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &integer}},
			func(tasks []string) any {
				m := map[string]any{}
				for _, t := range tasks {
					m[t] = int64(10)
				}
				return m
			}},
		{"Groups", "groups of {amount, tasks: [names]}, listType=atomic (the shape in use)",
			apiextensionsv1.JSONSchemaProps{Type: "array", XListType: ptr.To("atomic"),
				Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"amount", "tasks"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"amount": integer, "tasks": {Type: "array", XListType: ptr.To("atomic"),
						Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &str}}}}}},
			func(tasks []string) any {
				names := make([]any, 0, len(tasks))
				for _, t := range tasks {
					names = append(names, t)
				}
				return []any{map[string]any{"amount": int64(10), "tasks": names}}
			}},
		{"PackedString", "one string \"task=points,…\" (not used: unreadable)", str,
			func(tasks []string) any {
				var b strings.Builder
				for _, t := range tasks {
					b.WriteString(t + "=10,")
				}
				return b.String()
			}},
	}
)

func main() {
	holds := flag.Int("holds", 1404, "holds on the account (1,404 is what hack/bench/submit leaves on its hot account)")
	rounds := flag.Int("n", 60, "status updates per format")
	flag.Parse()
	if err := run(*holds, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "holdformats:", err)
		os.Exit(1)
	}
}

func run(nHolds, rounds int) error {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range formats {
		crds = append(crds, crd(f.kind, f.schema))
	}
	env := &envtest.Environment{CRDs: crds}
	cfg, err := env.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	ctx := context.Background()
	tasks := make([]string, nHolds)
	for i := range tasks {
		tasks[i] = "vt-" + harness.RandomHex(12) // as long as a REST task name (vt- + 24 characters)
	}
	slices.Sort(tasks)

	fmt.Printf("### Hold formats: one status update with %d holds\n\n%s\n\n", nHolds, harness.Machine())
	fmt.Printf("Each update changes the balance and adds one hold; %d updates per format, one at a time, all formats on one control plane.\n\n", rounds)
	fmt.Println("| format | object JSON | update p50 | update mean | ÷ AtomicMap (mean) |")
	fmt.Println("|---|---:|---:|---:|---:|")
	means := map[string]time.Duration{}
	type row struct {
		f         format
		size      int
		p50, mean time.Duration
	}
	var rows []row
	for _, f := range formats {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1", Kind: f.kind})
		u.SetNamespace("default")
		u.SetName("account")
		if err := c.Create(ctx, u); err != nil {
			return err
		}
		var lat []time.Duration
		for i := range rounds {
			u.Object["status"] = map[string]any{"balance": int64(i), "holds": f.value(append(tasks, fmt.Sprintf("vt-extra%04d", i)))}
			start := time.Now()
			if err := c.Status().Update(ctx, u); err != nil {
				return fmt.Errorf("%s: %w", f.kind, err)
			}
			lat = append(lat, time.Since(start))
		}
		raw, err := u.MarshalJSON()
		if err != nil {
			return err
		}
		var sum time.Duration
		for _, d := range lat {
			sum += d
		}
		slices.Sort(lat)
		r := row{f: f, size: len(raw), p50: harness.Quantile(lat, 0.5), mean: sum / time.Duration(len(lat))}
		means[f.kind] = r.mean
		rows = append(rows, r)
	}
	for _, r := range rows {
		fmt.Printf("| %s: %s | %d KiB | %s | %s | %.2f |\n", r.f.kind, r.f.what, r.size/1024, harness.Ms(r.p50), harness.Ms(r.mean),
			float64(r.mean)/float64(means["AtomicMap"]))
	}
	return nil
}

const group = "expt.videogen.dev"

func crd(kind string, holds apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
	plural := strings.ToLower(kind) + "s"
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, Plural: plural, ListKind: kind + "List", Singular: strings.ToLower(kind)},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"status": {Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{"balance": integer, "holds": holds}}}}}}},
		},
	}
}

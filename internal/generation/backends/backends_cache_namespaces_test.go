package backends

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// jobConfig is a Job backend config for capability with its Jobs in namespace ("" for each
// task's own).
func jobConfig(capability, namespace string) string {
	cfg := fmt.Sprintf(`
capabilities:
  %s:
    template:
      spec:
        containers:
          - name: gen
            image: example.com/gen:1.0
`, capability)
	if namespace != "" {
		cfg += "namespace: " + namespace + "\n"
	}
	return cfg
}

// cacheEntries is what byObject holds for the type of obj: every entry whose key is of that type.
func cacheEntries(byObject map[client.Object]cache.ByObject, obj client.Object) []cache.ByObject {
	var out []cache.ByObject
	for k, v := range byObject {
		if fmt.Sprintf("%T", k) == fmt.Sprintf("%T", obj) {
			out = append(out, v)
		}
	}
	return out
}

// Input: a backends config with two Job
// backends whose Jobs run in namespaces of their own, e.g. gpu-a100 (namespace jobs-a100) for
// video.short and gpu-h100 (namespace jobs-h100) for video.eraser (two node pools, a
// ResourceQuota each), or one in each task's namespace and one in a namespace of its own.
// File.CacheByObject gave one Job entry and one Pod entry per Job backend, each under a key of
// its own (a new &batchv1.Job{}), each restricted to its backend's namespace: controller-runtime
// builds one cache per type and keeps whichever entry its map iteration meets last
// (delegating.caches[gvk] = cache), at random at each start of the manager. The other backend's
// Jobs and pods are outside the cache: every Observe of its stages fails ("unable to get ...
// because of unknown namespace for the cache"), which is an outage, not a refusal. What the
// user sees: the tasks of that backend's capabilities say "backend unavailable" until their
// timeout and are refunded, while their Jobs run to completion, unpaid, their results never
// read. The fix: one entry per type, watching every namespace a Job backend runs Jobs in (all
// namespaces when one runs them in its tasks' own). Failed before the fix with two Job entries.
func TestCacheByObjectWatchesTheNamespacesOfEveryJobBackend(t *testing.T) {
	for name, tc := range map[string]struct {
		a, b string
		want []string // nil: every namespace
	}{
		"two namespaces of their own":       {"jobs-a100", "jobs-h100", []string{"jobs-a100", "jobs-h100"}},
		"the tasks' own and one of its own": {"", "jobs-h100", nil},
		"one namespace for both":            {"jobs", "jobs", []string{"jobs"}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "a.yaml", jobConfig("video.short", tc.a))
			write(t, dir, "b.yaml", jobConfig("video.eraser", tc.b))
			path := write(t, dir, "backends.yaml", fmt.Sprintf(`
backends:
- name: gpu-a100
  capabilities: [video.short]
  job: {configFile: %s}
- name: gpu-h100
  capabilities: [video.eraser]
  job: {configFile: %s}
`, filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")))
			f, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			byObject := f.CacheByObject()
			for _, obj := range []client.Object{&batchv1.Job{}, &corev1.Pod{}} {
				entries := cacheEntries(byObject, obj)
				if len(entries) != 1 {
					t.Errorf("%T: %d cache entries (the cache keeps one of them, at random)", obj, len(entries))
					continue
				}
				var got []string
				for ns := range entries[0].Namespaces {
					got = append(got, ns)
				}
				slices.Sort(got)
				if !slices.Equal(got, tc.want) {
					t.Errorf("%T: the cache watches namespaces %v, want %v (nil: all)", obj, got, tc.want)
				}
				sel := entries[0].Label
				if sel == nil || !sel.Matches(labels.Set{"app.kubernetes.io/managed-by": "videogen-operator", "app.kubernetes.io/component": "generation-job"}) ||
					sel.Matches(labels.Set{"app": "other"}) {
					t.Errorf("%T: label selector %v", obj, sel)
				}
			}
		})
	}
}

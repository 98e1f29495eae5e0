package manifests

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/videogen-dev/videogen-operator/internal/generation/jobbackend"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// Every flag a rendered manifest gives one of this module's binaries is one the binary has,
// with a value it parses: a renamed or removed flag would otherwise show only as a pod in
// CrashLoopBackOff after a deploy. The binary judges, as `make run` has it judge --manager-arg
// (internal/localstack): run with the manifest's arguments and then --help, Go's flag package
// exits 2 naming an unknown flag or a value it cannot parse, and 0 when every flag parsed.
// The containers are the Deployments' (the image's entrypoint when they set no command) and the
// Job backend's pod templates that run `worker job`.
func TestManifestFlagsExistInTheBinaries(t *testing.T) {
	rendered := map[string][]*unstructured.Unstructured{}
	for _, dir := range kustomizations {
		rendered[dir] = renderFrom(t, dir)
	}
	bin := buildBinaries(t, "manager", "apiserver", "worker")
	checked := map[string]bool{}
	for _, dir := range kustomizations {
		for _, inv := range invocations(t, rendered[dir]) {
			checked[inv.program] = true
			binary, sub, _ := strings.Cut(inv.program, " ") // "worker job": the worker, job first
			args := append(slices.Clip(inv.args), "--help")
			if sub != "" {
				args = append([]string{sub}, args...)
			}
			out, err := exec.Command(filepath.Join(bin, binary), args...).CombinedOutput()
			if err != nil {
				// What precedes the usage is flag's reason; none: --help itself failed.
				reason, _, _ := strings.Cut(string(out), "Usage")
				if reason = strings.TrimSpace(reason); reason == "" {
					reason = "it printed its usage and failed: --help must exit 0"
				}
				t.Errorf("%s: %s refuses its arguments %v: %v: %s", dir, inv.where, inv.args, err, reason)
			}
		}
	}
	for _, program := range []string{"manager", "apiserver", "worker"} {
		if !checked[program] {
			t.Errorf("no manifest runs %s: is the mapping of containers to binaries out of date?", program)
		}
	}
	if !checked["worker job"] {
		t.Error("no Job backend pod template runs `worker job` (config/e2e routes video.eraser to one)")
	}
}

// invocation is one of this module's programs as a manifest runs it.
type invocation struct {
	where   string // Deployment/container, or the Job template's ConfigMap key and capability
	program string // manager, apiserver, worker, or "worker job"
	args    []string
}

// invocations finds the containers of objs that run one of this module's binaries: by their
// command (/manager, /apiserver in the operator image), or the worker image's entrypoint.
func invocations(t *testing.T, objs []*unstructured.Unstructured) []invocation {
	t.Helper()
	var found []invocation
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment":
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
				t.Fatal(err)
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				if inv, ok := invocationOf(c); ok {
					inv.where = "Deployment " + d.Name + ", container " + c.Name + ": " + inv.program
					found = append(found, inv)
				}
			}
		case "ConfigMap":
			if !strings.HasSuffix(u.GetName(), "backends") {
				continue
			}
			data, _, _ := unstructured.NestedStringMap(u.Object, "data")
			for key, content := range data {
				if key == "backends.yaml" || !strings.HasSuffix(key, ".yaml") {
					continue
				}
				cfg, err := jobbackend.ParseConfig([]byte(content))
				if err != nil {
					t.Fatalf("ConfigMap %s, %s: %v", u.GetName(), key, err)
				}
				for capability, cc := range cfg.Capabilities {
					for _, c := range cc.Template.Spec.Containers {
						if inv, ok := invocationOf(c); ok {
							inv.where = "ConfigMap " + u.GetName() + ", " + key + ", " + string(capability) + ", container " + c.Name + ": " + inv.program
							found = append(found, inv)
						}
					}
				}
			}
		}
	}
	return found
}

func invocationOf(c corev1.Container) (invocation, bool) {
	if len(c.Command) > 0 {
		switch c.Command[0] {
		case "/manager", "/apiserver":
			return invocation{program: strings.TrimPrefix(c.Command[0], "/"), args: append(c.Command[1:], c.Args...)}, true
		}
		return invocation{}, false
	}
	// No command: the image's entrypoint, which only the worker image leaves to its args.
	repo, _, _ := strings.Cut(c.Image, ":")
	if !strings.HasSuffix(repo, "videogen-worker") {
		return invocation{}, false
	}
	if len(c.Args) > 0 && c.Args[0] == "job" {
		return invocation{program: "worker job", args: c.Args[1:]}, true
	}
	return invocation{program: "worker", args: c.Args}, true
}

// buildBinaries builds ./cmd/<name> of this module into a temporary directory.
func buildBinaries(t *testing.T, names ...string) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range names {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./cmd/"+name)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", name, err, out)
		}
	}
	return dir
}

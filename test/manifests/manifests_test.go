// Package manifests checks what `make deploy` and `make build-installer` would apply: every
// kustomization under config/ is rendered with bin/kustomize and sent to a real kube-apiserver
// (envtest) as a server-side dry run, after installing the rendered CRDs for real. It also holds
// the Deployments to the pod security settings docs/deploy.md promises, and checks that the
// backends ConfigMap parses and points at Services that exist.
package manifests

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation/backends"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// Every kustomization a user or a script applies. config/e2e/demo needs the CRDs, which the
// others bring; it is rendered last.
var kustomizations = []string{"config/default", "config/prometheus", "config/e2e", "config/e2e/demo"}

// Kinds whose CRDs a plain cluster lacks; the overlays that contain them say so.
var skippedKinds = map[string]bool{"ServiceMonitor": true, "PrometheusRule": true}

func TestRenderedManifestsAreAccepted(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	kustomize := filepath.Join(root, "bin", "kustomize")
	if _, err := os.Stat(kustomize); err != nil {
		t.Skip("bin/kustomize is missing (make verify-manifests builds it)")
	}
	rendered := map[string][]*unstructured.Unstructured{}
	for _, dir := range kustomizations {
		rendered[dir] = render(t, kustomize, filepath.Join(root, dir))
	}

	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	env.CRDDirectoryPaths = nil // install the rendered CRDs instead, below
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, u := range rendered["config/default"] {
		if u.GetKind() == "CustomResourceDefinition" {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
				t.Fatal(err)
			}
			crds = append(crds, crd)
		}
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: crds}); err != nil {
		t.Fatalf("installing the rendered CRDs: %v", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			objs := rendered[dir]
			// Namespaced objects are only accepted in an existing namespace: create those for real.
			for _, u := range objs {
				if u.GetKind() == "Namespace" {
					if err := c.Create(ctx, u.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
						t.Fatalf("namespace %s: %v", u.GetName(), err)
					}
				}
			}
			for _, u := range objs {
				if u.GetKind() == "Namespace" || u.GetKind() == "CustomResourceDefinition" || skippedKinds[u.GetKind()] {
					continue
				}
				if err := c.Create(ctx, u.DeepCopy(), client.DryRunAll); err != nil {
					t.Errorf("%s %s/%s rejected: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
				}
			}
		})
	}
}

func TestDeploymentsAreHardened(t *testing.T) {
	for _, dir := range []string{"config/default", "config/e2e"} {
		t.Run(dir, func(t *testing.T) {
			for _, u := range renderFrom(t, dir) {
				if u.GetKind() != "Deployment" {
					continue
				}
				d := &appsv1.Deployment{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
					t.Fatal(err)
				}
				checkPod(t, d.Name, d.Spec.Template.Spec)
			}
		})
	}
}

func checkPod(t *testing.T, name string, pod corev1.PodSpec) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: pod must set runAsNonRoot", name)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod must use the RuntimeDefault seccomp profile", name)
	}
	all := append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...)
	for _, ctr := range all {
		sc := ctr.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s/%s: readOnlyRootFilesystem must be true", name, ctr.Name)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s/%s: allowPrivilegeEscalation must be false", name, ctr.Name)
		}
		if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("%s/%s: must drop ALL capabilities", name, ctr.Name)
		}
	}
	for _, ctr := range pod.Containers {
		if ctr.LivenessProbe == nil || ctr.ReadinessProbe == nil {
			t.Errorf("%s/%s: needs liveness and readiness probes", name, ctr.Name)
		}
		if ctr.Resources.Requests.Cpu().IsZero() || ctr.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s/%s: needs CPU and memory requests", name, ctr.Name)
		}
		if ctr.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s/%s: needs a memory limit", name, ctr.Name)
		}
	}
}

// The backends ConfigMap must parse, route every capability, and name Services of the same
// render; the apiserver's --public-url must name the API Service (the worker fetches uploads
// there).
func TestBackendsAndURLsPointAtServices(t *testing.T) {
	checkBackendsAndURLs(t, renderFrom(t, "config/default"))
}

func checkBackendsAndURLs(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	services := map[string]corev1.Service{}
	var configData string
	var apiserverArgs []string
	for _, u := range objs {
		switch u.GetKind() {
		case "Service":
			s := corev1.Service{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s); err != nil {
				t.Fatal(err)
			}
			services[s.Name+"."+s.Namespace+".svc"] = s
		case "ConfigMap":
			if strings.HasSuffix(u.GetName(), "backends") {
				configData, _, _ = unstructured.NestedString(u.Object, "data", "backends.yaml")
			}
		case "Deployment":
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
				t.Fatal(err)
			}
			for _, ctr := range d.Spec.Template.Spec.Containers {
				if ctr.Name == "apiserver" {
					apiserverArgs = ctr.Args
				}
			}
		}
	}
	if configData == "" {
		t.Fatal("no backends ConfigMap with a backends.yaml key")
	}
	path := filepath.Join(t.TempDir(), "backends.yaml")
	if err := os.WriteFile(path, []byte(configData), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := backends.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	// The token files are mounted in the pod (TestTheManagerSendsTheTokenTheWorkerRequires);
	// here any file will do.
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, e := range file.Backends {
		if e.HTTP != nil && e.HTTP.TokenFile != "" {
			e.HTTP.TokenFile = token
		}
	}
	routes, err := file.Routes(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, capability := range videogenv1alpha1.Capabilities {
		if _, _, ok := routes.Route(capability); !ok {
			t.Errorf("no backend serves %s", capability)
		}
	}
	for _, e := range file.Backends {
		if e.HTTP != nil {
			requireService(t, services, "backend "+e.Name, e.HTTP.URL)
		}
	}
	found := false
	for _, a := range apiserverArgs {
		if v, ok := strings.CutPrefix(a, "--public-url="); ok {
			requireService(t, services, "apiserver --public-url", v)
			found = true
		}
	}
	if !found {
		t.Error("the apiserver container sets no --public-url")
	}
}

func requireService(t *testing.T, services map[string]corev1.Service, what, raw string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	s, ok := services[u.Hostname()]
	if !ok {
		t.Errorf("%s: %s names no Service of the render", what, raw)
		return
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	for _, p := range s.Spec.Ports {
		if p.Port > 0 && port == strconv.Itoa(int(p.Port)) {
			return
		}
	}
	t.Errorf("%s: Service %s has no port %s", what, u.Hostname(), port)
}

func renderFrom(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	kustomize := filepath.Join(root, "bin", "kustomize")
	if _, err := os.Stat(kustomize); err != nil {
		t.Skip("bin/kustomize is missing (make verify-manifests builds it)")
	}
	return render(t, kustomize, filepath.Join(root, dir))
}

// render runs `kustomize build dir` and splits the output into objects.
func render(t *testing.T, kustomize, dir string) []*unstructured.Unstructured {
	t.Helper()
	return run(t, exec.Command(kustomize, "build", dir))
}

// run runs a command that prints manifests and splits its output into objects.
func run(t *testing.T, cmd *exec.Cmd) []*unstructured.Unstructured {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	what := strings.Join(cmd.Args, " ")
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, stderr.String())
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("%s: %v", what, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	if len(objs) == 0 {
		t.Fatalf("%s rendered nothing", what)
	}
	return objs
}

// The worker refuses to start without a token, and the manager must send the same one: its
// backends config names a tokenFile that the manager container mounts from the Secret the
// worker reads VIDEOGEN_WORKER_TOKEN from, neither of them optional.
func TestTheManagerSendsTheTokenTheWorkerRequires(t *testing.T) {
	for _, dir := range []string{"config/default", "config/e2e"} {
		t.Run(dir, func(t *testing.T) {
			var files map[string]string // the backends ConfigMap's files
			var manager, worker *appsv1.Deployment
			for _, u := range renderFrom(t, dir) {
				switch {
				case u.GetKind() == "ConfigMap" && strings.HasSuffix(u.GetName(), "backends"):
					files, _, _ = unstructured.NestedStringMap(u.Object, "data")
				case u.GetKind() == "Deployment":
					d := &appsv1.Deployment{}
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
						t.Fatal(err)
					}
					if strings.HasSuffix(d.Name, "controller-manager") {
						manager = d
					} else if strings.HasSuffix(d.Name, "worker") {
						worker = d
					}
				}
			}
			if files["backends.yaml"] == "" || manager == nil || worker == nil {
				t.Fatal("the render lacks the backends ConfigMap, the manager or the worker")
			}
			file := readBackendsFiles(t, files)
			workerCtr := container(t, worker, "worker")
			for _, a := range workerCtr.Args {
				if strings.HasPrefix(a, "--insecure-no-auth") {
					t.Errorf("the worker runs with %s", a)
				}
			}
			var fromEnv *corev1.SecretKeySelector
			for _, e := range workerCtr.Env {
				if e.Name == "VIDEOGEN_WORKER_TOKEN" && e.ValueFrom != nil {
					fromEnv = e.ValueFrom.SecretKeyRef
				}
			}
			if fromEnv == nil || (fromEnv.Optional != nil && *fromEnv.Optional) {
				t.Fatalf("the worker's VIDEOGEN_WORKER_TOKEN is not from a required Secret: %+v", fromEnv)
			}
			for _, e := range file.Backends {
				if e.HTTP == nil {
					continue
				}
				if e.HTTP.TokenFile == "" {
					t.Errorf("backend %s has no tokenFile", e.Name)
					continue
				}
				vol := volumeAt(manager.Spec.Template.Spec, container(t, manager, "manager"), filepath.Dir(e.HTTP.TokenFile))
				switch {
				case vol == nil || vol.Secret == nil:
					t.Errorf("backend %s: the manager mounts no Secret at %s", e.Name, filepath.Dir(e.HTTP.TokenFile))
				case vol.Secret.SecretName != fromEnv.Name || filepath.Base(e.HTTP.TokenFile) != fromEnv.Key:
					t.Errorf("backend %s: the manager reads %s/%s, the worker %s/%s", e.Name,
						vol.Secret.SecretName, filepath.Base(e.HTTP.TokenFile), fromEnv.Name, fromEnv.Key)
				case vol.Secret.Optional != nil && *vol.Secret.Optional:
					t.Errorf("backend %s: the manager's token volume is optional", e.Name)
				}
			}
		})
	}
}

// readBackendsFiles reads the backends ConfigMap's files as the manager sees them at its mount
// path, so that files the config names there (a Job backend's configFile) are read and checked
// too.
func readBackendsFiles(t *testing.T, files map[string]string) backends.File {
	t.Helper()
	const mountPath = "/etc/videogen/backends/"
	tmp := t.TempDir() + "/"
	for name, content := range files {
		content = strings.ReplaceAll(content, mountPath, tmp)
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file, err := backends.Read(filepath.Join(tmp, "backends.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return file
}

func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("deployment %s has no container %s", d.Name, name)
	return corev1.Container{}
}

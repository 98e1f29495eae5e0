package manifests

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// renderChartValues renders the chart with a values file's text.
func renderChartValues(t *testing.T, values string) []*unstructured.Unstructured {
	t.Helper()
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	return renderChartFile(t, "videogen-system", path)
}

// backendsConfigMap returns the data of the render's backends ConfigMap.
func backendsConfigMap(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == "ConfigMap" && strings.HasSuffix(u.GetName(), "-backends") {
			data, _, _ := unstructured.NestedStringMap(u.Object, "data")
			return data
		}
	}
	t.Fatal("no backends ConfigMap in the render")
	return nil
}

const jobBackendValues = `
worker:
  enabled: false
backends:
- name: gpu-jobs
  capabilities: [video.short]
  job:
    configFile: /etc/videogen/backends/gpu.yaml
jobConfigs:
  gpu.yaml:
    capabilities:
      video.short:
        template:
          spec:
            containers:
            - name: faceswap
              image: registry.example.com/faceswap:1.4
`

// A platform team that runs its own backends could route a capability to Kubernetes Jobs only
// with a kustomize overlay: a `job:` entry of backends names a configFile in the manager's
// container, and the chart had no way to put one there (Helm dropped any such value, and the
// manager stopped at start on "no such file or directory"). jobConfigs now puts each config
// beside backends.yaml in the backends ConfigMap (a map, or its text from --set-file), the
// manager restarts when one changes, and the chart refuses a configFile it does not mount.
func TestTheChartConfiguresAJobBackend(t *testing.T) {
	asText := strings.Replace(jobBackendValues, "  gpu.yaml:\n", "  gpu.yaml: |\n", 1)
	for name, values := range map[string]string{"map": jobBackendValues, "text": asText} {
		t.Run(name, func(t *testing.T) {
			objs := renderChartValues(t, values)
			file := readBackendsFiles(t, backendsConfigMap(t, objs))
			if len(file.Backends) != 1 || file.Backends[0].Job == nil || len(file.CacheByObject()) == 0 {
				t.Fatalf("the manager reads no Job backend config: %+v", file.Backends)
			}
		})
	}

	// The manager reads its backends at start only.
	before := managerDeployment(t, renderChartValues(t, jobBackendValues)).Spec.Template.Annotations["checksum/backends"]
	changed := strings.Replace(jobBackendValues, "faceswap:1.4", "faceswap:1.5", 1)
	if after := managerDeployment(t, renderChartValues(t, changed)).Spec.Template.Annotations["checksum/backends"]; after == before {
		t.Errorf("a new jobConfigs leaves the manager pod's checksum/backends at %q: the running manager keeps the old one", before)
	}

	// Jobs run in the tasks' namespaces (or the config's own): the manager creates and
	// deletes them and reads their pods cluster-wide.
	objs := renderChartValues(t, jobBackendValues)
	for _, want := range []struct{ group, resource, verbs string }{
		{"batch", "jobs", "create,delete,deletecollection,get,list,watch"},
		{"", "pods", "get,list,watch"},
	} {
		if !clusterRoleAllows(t, objs, "videogen-system", "videogen-controller-manager", want.group, want.resource, strings.Split(want.verbs, ",")...) {
			t.Errorf("the manager may not %s %s cluster-wide", want.verbs, want.resource)
		}
	}

	for _, c := range []struct{ name, values, want string }{
		{"a configFile with no jobConfigs entry",
			strings.Replace(jobBackendValues, "gpu.yaml\n", "other.yaml\n", 1), "jobConfigs"},
		{"a configFile the manager does not mount",
			strings.Replace(jobBackendValues, "/etc/videogen/backends/gpu.yaml", "/etc/videogen/jobs.yaml", 1), "jobConfigs"},
		{"a jobConfigs entry in place of backends.yaml",
			strings.ReplaceAll(jobBackendValues, "gpu.yaml", "backends.yaml"), "backends.yaml"},
	} {
		if stderr := chartRefusalFile(t, c.values); stderr != "" && !strings.Contains(stderr, c.want) {
			t.Errorf("%s: the refusal does not mention %s: %s", c.name, c.want, stderr)
		}
	}
}

// clusterRoleAllows says whether a ClusterRoleBinding of the render binds service account ns/sa
// to a ClusterRole of the render with a rule granting verbs on group/resource.
func clusterRoleAllows(t *testing.T, objs []*unstructured.Unstructured, ns, sa, group, resource string, verbs ...string) bool {
	t.Helper()
	roles := map[string]rbacv1.ClusterRole{}
	var bindings []rbacv1.ClusterRoleBinding
	for _, u := range objs {
		switch u.GetKind() {
		case "ClusterRole":
			roles[u.GetName()] = as[rbacv1.ClusterRole](t, u)
		case "ClusterRoleBinding":
			bindings = append(bindings, as[rbacv1.ClusterRoleBinding](t, u))
		}
	}
	for _, b := range bindings {
		if b.RoleRef.Kind != "ClusterRole" || !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == ns && s.Name == sa
		}) {
			continue
		}
		for _, rule := range roles[b.RoleRef.Name].Rules {
			if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) &&
				!slices.ContainsFunc(verbs, func(v string) bool { return !slices.Contains(rule.Verbs, v) }) {
				return true
			}
		}
	}
	return false
}

// chartNotes returns what `helm install` prints after installing with a values file's text
// (NOTES.txt), rendered without a cluster.
func chartNotes(t *testing.T, values string) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(helmBinary(t), "install", "videogen",
		filepath.Join(root, "charts", "videogen-operator"), "-n", "videogen-system", "--dry-run=client", "-f", path).CombinedOutput()
	if err != nil {
		t.Fatalf("helm install --dry-run=client: %v\n%s", err, out)
	}
	_, notes, ok := strings.Cut(string(out), "\nNOTES:\n")
	if !ok {
		t.Fatalf("helm install printed no NOTES:\n%s", out)
	}
	return notes
}

// With worker.enabled=false and backends of its own that send no worker token, the manager
// still mounted the Secret videogen-worker-token, so its pod stayed in ContainerCreating until
// someone made a Secret nothing reads (and NOTES.txt asked for it). The manager now mounts it
// only when a backend's tokenFile is in it: the reference worker's, by default.
func TestTheManagerMountsTheWorkerTokenOnlyWhenABackendSendsIt(t *testing.T) {
	const ownBackend = `
worker:
  enabled: false
backends:
- name: gpu
  capabilities: [video.short, video.eraser, video.template, image.pose]
  http:
    url: http://gpu-server.models.svc:8080
`
	withToken := strings.Replace(ownBackend, "svc:8080\n", "svc:8080\n    tokenFile: /etc/videogen/worker/token\n", 1)
	for _, c := range []struct {
		name, values string
		mounted      bool
	}{
		{"the reference worker", "{}", true},
		{"a backend of its own without a token", ownBackend, false},
		{"a backend of its own with the worker token", withToken, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod, _, _ := managerPod(t, renderChartValues(t, c.values))
			mounted := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
				return v.Secret != nil && v.Secret.SecretName == "videogen-worker-token"
			})
			if mounted != c.mounted {
				t.Errorf("the manager mounts videogen-worker-token: %v, want %v", mounted, c.mounted)
			}
			if asked := strings.Contains(chartNotes(t, c.values), "create secret generic videogen-worker-token"); asked != c.mounted {
				t.Errorf("NOTES.txt asks to create videogen-worker-token: %v, want %v", asked, c.mounted)
			}
		})
	}
}

// manager.replicas=0 rendered without a word: the REST API, the payment webhooks and the
// ledger stop with it, and nothing said so. A pause may be meant, so the chart renders it, and
// NOTES.txt says what stops and how to resume; a negative or fractional count, which the
// kube-apiserver would refuse only at install, is refused at render.
func TestTheChartSaysWhatManagerReplicasZeroStops(t *testing.T) {
	const paused = "manager:\n  replicas: 0\n"
	if d := managerDeployment(t, renderChartValues(t, paused)); d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
		t.Errorf("manager.replicas=0 renders replicas %v, want 0", d.Spec.Replicas)
	}
	notes := chartNotes(t, paused)
	for _, want := range []string{"manager.replicas is 0", "the REST API and the payment webhooks", "--set manager.replicas=1"} {
		if !strings.Contains(notes, want) {
			t.Errorf("with manager.replicas=0 NOTES.txt does not say %q:\n%s", want, notes)
		}
	}
	if notes := chartNotes(t, "{}"); strings.Contains(notes, "manager.replicas is 0") {
		t.Errorf("with one replica NOTES.txt says the manager is paused:\n%s", notes)
	}
	for _, n := range []string{"-1", "1.5"} {
		if stderr := chartRefusalFile(t, "manager:\n  replicas: "+n+"\n"); stderr != "" && !strings.Contains(stderr, "manager.replicas") {
			t.Errorf("manager.replicas=%s: the refusal does not name the value: %s", n, stderr)
		}
	}
}

// A backend of the platform team's own that wants a bearer token (http.tokenFile) had no
// Secret of its own to read it from: the chart mounted only the worker's, and took no other
// volume. manager.extraVolumes and manager.extraVolumeMounts now mount any, a tokenFile or a
// job.configFile may name a file there, and the chart refuses one that no volume holds (the
// manager would stop at start).
func TestTheChartMountsAnOwnBackendsToken(t *testing.T) {
	const values = `
worker:
  enabled: false
backends:
- name: gpu
  capabilities: [video.short, video.eraser, video.template, image.pose]
  http:
    url: http://gpu-server.models.svc:8080
    tokenFile: /etc/videogen/gpu/token
manager:
  extraVolumes:
  - name: gpu-token
    secret: {secretName: gpu-server-token}
  extraVolumeMounts:
  - name: gpu-token
    mountPath: /etc/videogen/gpu
    readOnly: true
`
	objs := renderChartValues(t, values)
	pod, _, _ := managerPod(t, objs)
	var manager corev1.Container
	for _, c := range pod.Containers {
		if c.Name == "manager" {
			manager = c
		}
	}
	if vol := volumeAt(pod, manager, "/etc/videogen/gpu"); vol == nil || vol.Secret == nil || vol.Secret.SecretName != "gpu-server-token" {
		t.Errorf("the manager mounts %+v at /etc/videogen/gpu, not the Secret gpu-server-token", vol)
	}

	jobInVolume := strings.Replace(strings.Replace(values, "secret: {secretName: gpu-server-token}", "configMap: {name: gpu-jobs}", 1),
		"  http:\n    url: http://gpu-server.models.svc:8080\n    tokenFile: /etc/videogen/gpu/token\n",
		"  job: {configFile: /etc/videogen/gpu/jobs.yaml}\n", 1)
	if got := backendsConfigMap(t, renderChartValues(t, jobInVolume))["backends.yaml"]; !strings.Contains(got, "/etc/videogen/gpu/jobs.yaml") {
		t.Errorf("a job.configFile in manager.extraVolumeMounts is not rendered: %s", got)
	}

	for _, c := range []struct{ name, values string }{
		{"a tokenFile no volume holds", strings.Replace(values, "/etc/videogen/gpu/token", "/etc/videogen/other/token", 1)},
		{"a tokenFile without extraVolumeMounts", values[:strings.Index(values, "manager:\n")]},
	} {
		if stderr := chartRefusalFile(t, c.values); stderr != "" && !strings.Contains(stderr, "extraVolumeMounts") {
			t.Errorf("%s: the refusal does not mention manager.extraVolumeMounts: %s", c.name, stderr)
		}
	}
}

// docs/deploy.md's Secrets section has the apiserver read the Event Service's tokens from a
// mounted Secret (--event-service-tokens-file), but the chart gave the apiserver container no
// volume of the platform team's: through the chart the EventService.Handle RPC could not be
// turned on. apiserver.extraVolumeMounts now mounts a volume of manager.extraVolumes there.
func TestTheChartMountsTheEventServiceTokensInTheAPIServer(t *testing.T) {
	const values = `
manager:
  extraVolumes:
  - name: event-service-tokens
    secret: {secretName: videogen-event-service-tokens}
apiserver:
  extraVolumeMounts:
  - name: event-service-tokens
    mountPath: /etc/videogen/event-service
    readOnly: true
  extraArgs: [--event-service-tokens-file=/etc/videogen/event-service/tokens]
`
	pod, _, _ := managerPod(t, renderChartValues(t, values))
	for _, c := range pod.Containers {
		if c.Name != "apiserver" {
			continue
		}
		if vol := volumeAt(pod, c, "/etc/videogen/event-service"); vol == nil || vol.Secret == nil || vol.Secret.SecretName != "videogen-event-service-tokens" {
			t.Errorf("the apiserver mounts %+v at /etc/videogen/event-service, not the Secret videogen-event-service-tokens", vol)
		}
		if !slices.Contains(c.Args, "--event-service-tokens-file=/etc/videogen/event-service/tokens") {
			t.Errorf("the apiserver's args %q lack --event-service-tokens-file", c.Args)
		}
		return
	}
	t.Fatal("no apiserver container in the manager pod")
}

// NOTES.txt names the operator image that was installed: installed from the chart in a checkout
// with `--set image.repository=…,image.tag=0.1.0` (docs/deploy.md, Installing), it said
// "videogen-operator latest is installed", the chart's appVersion, not the image running.
func TestChartNotesNameTheInstalledImage(t *testing.T) {
	helmBinary(t)
	notes := chartNotes(t, "image: {repository: registry.example.com/videogen-operator, tag: 0.1.0}\n")
	first, _, _ := strings.Cut(notes, "\n")
	if !strings.Contains(first, "registry.example.com/videogen-operator:0.1.0") || strings.Contains(first, "latest") {
		t.Errorf("NOTES.txt's first line does not name the image installed (registry.example.com/videogen-operator:0.1.0): %q", first)
	}
}

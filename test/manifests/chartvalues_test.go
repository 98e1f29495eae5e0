package manifests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/videogen-dev/videogen-operator/internal/httpserver"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// A chart user whose Ingress controller needs longer than 5 s to drop a pod raises the
// apiserver's drain with apiserver.shutdownDelaySeconds, and the pod's grace period follows:
// with a longer --shutdown-delay in extraArgs and the fixed 35 s, SIGKILL came before the
// requests in flight had their 15 s (docs/deploy.md said "raise both", and the chart had no
// value to raise the grace period with).
func TestTheChartsGracePeriodFollowsTheShutdownDelay(t *testing.T) {
	objs := renderChart(t, "videogen-system", "apiserver.shutdownDelaySeconds=60")
	found := false
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		pod := as[appsv1.Deployment](t, u).Spec.Template.Spec
		for _, c := range pod.Containers {
			inv, ok := invocationOf(c)
			if !ok || inv.program != "apiserver" {
				continue
			}
			found = true
			if !containsArg(inv.args, "--shutdown-delay=60s") {
				t.Errorf("apiserver args %v: want --shutdown-delay=60s", inv.args)
			}
			need := 60*time.Second + httpserver.ShutdownTimeout + shutdownMargin
			if pod.TerminationGracePeriodSeconds == nil || time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second < need {
				t.Errorf("terminationGracePeriodSeconds %v, want at least %v", pod.TerminationGracePeriodSeconds, need)
			}
		}
	}
	if !found {
		t.Fatal("no apiserver container")
	}
}

// --shutdown-delay in apiserver.extraArgs would leave the grace period behind: the chart
// refuses it and names the value to use.
func TestTheChartRefusesAShutdownDelayInExtraArgs(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm := helmBinary(t)
	cmd := exec.Command(helm, "template", "videogen", filepath.Join(root, "charts", "videogen-operator"),
		"--set", "apiserver.extraArgs={--shutdown-delay=60s}")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if _, err := cmd.Output(); err == nil {
		t.Fatal("the chart rendered --shutdown-delay in apiserver.extraArgs, with its grace period left at 35 s")
	}
	if !strings.Contains(stderr.String(), "apiserver.shutdownDelaySeconds") {
		t.Errorf("the refusal does not name the value to use: %s", stderr.String())
	}
}

func containsArg(args []string, want string) bool {
	for _, a := range args {
		if a == want {
			return true
		}
	}
	return false
}

// The manager prices kubectl's tasks and the apiserver REST tasks, each with its own
// --default-price: the chart sets both from defaultPrice, and refuses a --default-price in
// either extraArgs, which would make the same template cost two prices.
func TestTheChartRefusesADefaultPriceInExtraArgs(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm := helmBinary(t)
	for _, set := range []string{"manager.extraArgs={--default-price=20}", "apiserver.extraArgs={--default-price=20}"} {
		cmd := exec.Command(helm, "template", "videogen", filepath.Join(root, "charts", "videogen-operator"), "--set", set)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if _, err := cmd.Output(); err == nil {
			t.Errorf("--set %s rendered: one container's default price differs from the other's", set)
		} else if !strings.Contains(stderr.String(), "defaultPrice") {
			t.Errorf("--set %s: the refusal does not name the value to use: %s", set, stderr.String())
		}
	}
}

// chartRefusal runs `helm template` with --set values that the chart must refuse, and returns
// helm's error output ("" and a test error when it rendered).
func chartRefusal(t *testing.T, set ...string) string {
	t.Helper()
	var args []string
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return helmRefusal(t, fmt.Sprintf("--set %v", set), args...)
}

// chartRefusalFile is chartRefusal with a values file's text.
func chartRefusalFile(t *testing.T, values string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	return helmRefusal(t, "values\n"+values, "-f", path)
}

func helmRefusal(t *testing.T, what string, args ...string) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	args = append([]string{"template", "videogen", filepath.Join(root, "charts", "videogen-operator")}, args...)
	cmd := exec.Command(helmBinary(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if _, err := cmd.Output(); err == nil {
		t.Errorf("%s rendered; the chart must refuse it", what)
		return ""
	}
	return stderr.String()
}

// values.yaml and docs/deploy.md say a second manager replica needs the apiserver's S3 blob
// store: with the default (an emptyDir per pod) an image uploaded to one replica is fetched by
// the worker through the API Service from either, and half of the tasks with an uploaded face
// failed on a 404. The chart rendered `--set manager.replicas=2` alone without a word; it now
// refuses it unless the last --blob-store of apiserver.extraArgs is s3.
func TestTheChartRefusesManagerReplicasWithoutTheS3BlobStore(t *testing.T) {
	for _, set := range [][]string{
		{"manager.replicas=2"},
		{"manager.replicas=2", "apiserver.extraArgs={--blob-store=s3,--blob-store=dir}"},
	} {
		if stderr := chartRefusal(t, set...); stderr != "" && !strings.Contains(stderr, "--blob-store=s3") {
			t.Errorf("--set %v: the refusal does not say what is missing: %s", set, stderr)
		}
	}
	for _, extra := range []string{"{--blob-store=s3,--s3-bucket=uploads}", "{--blob-store,s3}", "{-blob-store=s3}"} {
		objs := renderChart(t, "videogen-system", "manager.replicas=2", "apiserver.extraArgs="+extra)
		if d := managerDeployment(t, objs); d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("apiserver.extraArgs=%s: replicas %v, want 2", extra, d.Spec.Replicas)
		}
	}
}

func managerDeployment(t *testing.T, objs []*unstructured.Unstructured) appsv1.Deployment {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == "Deployment" && strings.HasSuffix(u.GetName(), "-controller-manager") {
			return as[appsv1.Deployment](t, u)
		}
	}
	t.Fatal("no manager Deployment")
	return appsv1.Deployment{}
}

// Several manager replicas are there so that the REST API, the payment webhooks and the ledger
// outlive one pod; the chart rendered them with nothing keeping them apart: both could land on
// one node, and a drain evicted them together (no PodDisruptionBudget), every webhook and task
// creation answered 503 until one came back. With more than one replica the chart now renders a
// PodDisruptionBudget (one pod out at a time) and prefers spreading the pods over nodes.
func TestTheChartKeepsManagerReplicasApart(t *testing.T) {
	objs := renderChart(t, "videogen-system", "manager.replicas=2", "apiserver.extraArgs={--blob-store=s3}")
	pod := managerDeployment(t, objs).Spec.Template
	var pdbs int
	for _, u := range objs {
		if u.GetKind() != "PodDisruptionBudget" {
			continue
		}
		pdbs++
		pdb := as[policyv1.PodDisruptionBudget](t, u)
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			t.Errorf("PodDisruptionBudget %s selects %v, not the manager pods %v", pdb.Name, pdb.Spec.Selector, pod.Labels)
		}
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("PodDisruptionBudget %s: maxUnavailable %v, want 1", pdb.Name, pdb.Spec.MaxUnavailable)
		}
	}
	if pdbs != 1 {
		t.Errorf("%d PodDisruptionBudgets with manager.replicas=2, want 1", pdbs)
	}
	spread := false
	if a := pod.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			sel, err := metav1.LabelSelectorAsSelector(w.PodAffinityTerm.LabelSelector)
			spread = spread || (err == nil && w.PodAffinityTerm.TopologyKey == "kubernetes.io/hostname" && sel.Matches(labels.Set(pod.Labels)))
		}
	}
	if !spread {
		t.Errorf("manager pods with replicas=2: no anti-affinity spreading them over nodes: %+v", pod.Spec.Affinity)
	}
}

// A flag in extraArgs wins over the chart's own (values.yaml: "a later flag wins"), but some of
// the chart's flags are wiring that other objects of the chart follow, and an override left
// those behind without a word: --webhook-namespace=payments in apiserver.extraArgs moved where
// the apiserver reads connector Secrets and creates PaymentEvents while the chart's Role stayed
// in the release namespace (every payment webhook failed, forbidden, until the processor gave
// up); --bind-address moved the apiserver off the port its Services and NetworkPolicy name
// (the pod stayed Ready, its probes on their own port, while every request was refused); the
// ledger's address and Service name are what the other container and the ledger NetworkPolicy
// are pointed at. The chart refuses these, naming the value to use where there is one.
func TestTheChartRefusesExtraArgsThatUnwireIt(t *testing.T) {
	for set, want := range map[string]string{
		"apiserver.extraArgs={--webhook-namespace=payments}":        "apiserver.webhookNamespace",
		"apiserver.extraArgs={-webhook-namespace,payments}":         "apiserver.webhookNamespace",
		"apiserver.extraArgs={--bind-address=:9000}":                "--bind-address",
		"apiserver.extraArgs={--ledger-url=http://x:8084}":          "--ledger-url",
		"manager.extraArgs={--ledger-bind-address=:9084}":           "--ledger-bind-address",
		"manager.extraArgs={--ledger-service=other}":                "--ledger-service",
		"manager.extraArgs={-default-price=20}":                     "defaultPrice",
		"apiserver.extraArgs={--rate-limit=5,--shutdown-delay,60s}": "apiserver.shutdownDelaySeconds",
	} {
		if stderr := chartRefusal(t, set); stderr != "" && !strings.Contains(stderr, want) {
			t.Errorf("--set %s: the refusal does not name %s: %s", set, want, stderr)
		}
	}
	// Flags the chart leaves to extraArgs still pass.
	renderChart(t, "videogen-system", "apiserver.extraArgs={--rate-limit=5,--square-notification-url=https://h/v1/webhooks/square}",
		"manager.extraArgs={--max-concurrent-tasks=20}")
}

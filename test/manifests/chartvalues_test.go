package manifests

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

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
	helm := filepath.Join(root, "bin", "helm")
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
	helm := filepath.Join(root, "bin", "helm")
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

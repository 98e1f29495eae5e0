package manifests

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// A number given in a values file reaches the binaries as the number, not as Go's shortest
// float. Input: a platform engineer installs with `helm install -f values.yaml` where
// values.yaml says `defaultPrice: 1000000` (within the documented 0..1000000000; points are
// often a small unit). Helm reads a values file's numbers as float64, and a template printing
// one with {{ .Values.defaultPrice }} writes %v of a float64: 1e+06 from 1000000 on. Before the
// fix the chart rendered `--default-price=1e+06` for the manager and the apiserver; Go's flag
// package refuses it (`invalid value "1e+06" for flag -default-price: parse error`), both
// containers exit 2 at start and the pod stays in CrashLoopBackOff: no REST API, no ledger, no
// task reconciled. `--set defaultPrice=1000000` renders 1000000 (--set parses integers as
// int64), which is why --set-based tests never saw it. The same for worker.maxConcurrent.
// Every step is one `helm install -f` away.
func TestChartNumbersFromAValuesFileParseInTheBinaries(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("defaultPrice: 1000000\nworker:\n  maxConcurrent: 1000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	objs := renderChartFile(t, "videogen-system", values)
	bin := buildBinaries(t, "manager", "apiserver", "worker")
	seen := map[string]bool{}
	for _, inv := range invocations(t, objs) {
		binary, sub, _ := strings.Cut(inv.program, " ")
		for _, a := range inv.args {
			if strings.HasPrefix(a, "--default-price=") || strings.HasPrefix(a, "--max-concurrent=") {
				seen[inv.program+" "+a] = true
			}
		}
		args := append(slices.Clip(inv.args), "--help")
		if sub != "" {
			args = append([]string{sub}, args...)
		}
		if out, err := exec.Command(filepath.Join(bin, binary), args...).CombinedOutput(); err != nil {
			reason, _, _ := strings.Cut(string(out), "Usage")
			t.Errorf("%s refuses its arguments %v: %v: %s", inv.where, inv.args, err, strings.TrimSpace(reason))
		}
	}
	for _, want := range []string{"manager --default-price=1000000", "apiserver --default-price=1000000", "worker --max-concurrent=1000000"} {
		if !seen[want] {
			t.Errorf("the chart does not render %s (it renders %v)", want, seen)
		}
	}
}

// renderChartFile runs `helm template` on the chart with a values file (-f), whose numbers
// Helm reads as float64, where --set reads integers as int64.
func renderChartFile(t *testing.T, namespace, values string) []*unstructured.Unstructured {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm := helmBinary(t)
	return run(t, exec.Command(helm, "template", "videogen", filepath.Join(root, "charts", "videogen-operator"),
		"--namespace", namespace, "-f", values))
}

// defaultPrice outside what the binaries take is refused by `helm template`, not rendered.
// Input: `--set defaultPrice=-1` (or 1000000001, 2.5, abc; or `defaultPrice: -3` in a values
// file). Before the fix the chart rendered `--default-price=-1` for the manager and the
// apiserver: the manager exits at start ("--default-price must be from 0 to 1000000000"), so
// does the apiserver, and 2.5 or abc do not parse at all; the pod crash-loops with no REST API,
// no ledger and no task reconciled. The range is pricing.CheckDefault's, the binaries' own.
func TestTheChartRefusesADefaultPriceTheBinariesRefuse(t *testing.T) {
	for _, v := range []string{"-1", "1000000001", "9999999999", "2.5", "abc"} {
		if msg := chartRefusal(t, "defaultPrice="+v); msg != "" && !strings.Contains(msg, "defaultPrice must be a whole number of points from 0 to 1000000000") {
			t.Errorf("--set defaultPrice=%s: the refusal does not say the range: %s", v, msg)
		}
	}
	if msg := chartRefusalFile(t, "defaultPrice: -3\n"); msg != "" && !strings.Contains(msg, "from 0 to 1000000000") {
		t.Errorf("defaultPrice: -3 in a values file: the refusal does not say the range: %s", msg)
	}
	for _, v := range []string{"0", "1000000000"} {
		objs := renderChart(t, "videogen-system", "defaultPrice="+v)
		n := 0
		for _, inv := range invocations(t, objs) {
			if slices.Contains(inv.args, "--default-price="+v) {
				n++
			}
		}
		if n != 2 {
			t.Errorf("--set defaultPrice=%s: %d containers render --default-price=%s, want the manager and the apiserver", v, n, v)
		}
	}
}

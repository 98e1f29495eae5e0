// Package hack_test checks what the scripts of hack/ tell a developer who asks them.
package hack_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Every script answers -h and --help with its header, which says how to call it, and does
// nothing else: `hack/kind-e2e.sh --help` installed and started Docker as root, `hack/bench/run.sh
// --help` ran every benchmark, `hack/gen-proto.sh --help` generated into a directory named
// --help. The scripts run with only bash and sed on PATH, so one that goes on to work fails
// (go, make, docker, apt-get, mkdir are not there) instead of doing it.
func TestEveryScriptAnswersHelp(t *testing.T) {
	scripts := executableScripts(t)
	if len(scripts) < 10 {
		t.Fatalf("found only %d scripts under hack/: %v", len(scripts), scripts)
	}
	for _, script := range scripts {
		for _, flag := range []string{"-h", "--help"} {
			out, err := runRestricted(t, script, flag)
			if err != nil {
				t.Errorf("%s %s: %v\n%s", script, flag, err, out)
				continue
			}
			if want := "Usage: " + script; !strings.Contains(out, want) {
				t.Errorf("%s %s does not say %q:\n%s", script, flag, want, out)
			}
			if strings.Contains(out, "set -euo") || strings.HasPrefix(out, "#") {
				t.Errorf("%s %s prints code, not its header:\n%s", script, flag, out)
			}
		}
	}
}

// hack/bench/run.sh takes all or scale; anything else ran all of them.
func TestBenchRefusesAnUnknownSet(t *testing.T) {
	out, err := runRestricted(t, "hack/bench/run.sh", "scael")
	exit := (*exec.ExitError)(nil)
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(out, "usage: hack/bench/run.sh [all|scale]") {
		t.Errorf("hack/bench/run.sh scael: %v\n%s", err, out)
	}
}

// executableScripts lists the *.sh files under hack/ that are meant to be run (executable;
// hack/kind/lib.sh and hack/lib/*.sh are sourced), relative to the module root.
func executableScripts(t *testing.T) []string {
	t.Helper()
	var scripts []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sh") {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode()&0o111 != 0 {
			scripts = append(scripts, filepath.Join("hack", path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return scripts
}

// runRestricted runs script (relative to the module root) with args under bash, with only
// bash and sed on PATH, from the module root, for at most 10 s.
func runRestricted(t *testing.T, script string, args ...string) (string, error) {
	t.Helper()
	bin := t.TempDir()
	var bash string
	for _, tool := range []string{"bash", "sed"} {
		path, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s is not installed", tool)
		}
		if err := os.Symlink(path, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
		if tool == "bash" {
			bash = path
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, append([]string{script}, args...)...)
	cmd.Dir = ".."
	cmd.Env = []string{"PATH=" + bin, "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// `make help` prints each target in a column as wide as its printf says: a longer name ran into
// its description (docker-build-worker did).
func TestMakeHelpColumnFitsEveryTarget(t *testing.T) {
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\\033\[36m%-(\d+)s\\033\[0m`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("no %-Ns column in the Makefile's help target")
	}
	width, _ := strconv.Atoi(string(m[1]))
	targets := regexp.MustCompile(`(?m)^([a-zA-Z_0-9-]+):.*?##`).FindAllSubmatch(makefile, -1)
	if len(targets) < 10 {
		t.Fatalf("found only %d documented targets", len(targets))
	}
	for _, target := range targets {
		if name := string(target[1]); len(name) >= width {
			t.Errorf("make help: target %s (%d characters) fills its %d-character column", name, len(name), width)
		}
	}
}

// The examples of hack/kind-e2e.sh and docs/kind-e2e.md focus on a spec that exists, and the
// script fails a focus that matches none: `hack/kind-e2e.sh -ginkgo.focus=eraser`, as both said,
// ran none of the suite's specs (the eraser spec is "erases the watermark …") and printed ok.
func TestKindE2EExampleFocusRunsASpec(t *testing.T) {
	if testing.Short() {
		t.Skip("builds test/e2e")
	}
	script, err := os.ReadFile("kind-e2e.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`go test [^\n]*\./test/e2e/ [^\n]*-ginkgo\.fail-on-empty`).Match(script) {
		t.Error("hack/kind-e2e.sh runs the suite without -ginkgo.fail-on-empty: a focus that matches no spec passes")
	}
	doc, err := os.ReadFile("../docs/kind-e2e.md")
	if err != nil {
		t.Fatal(err)
	}
	focus := regexp.MustCompile("hack/kind-e2e.sh -ginkgo\\.focus=([^\\s`]+)")
	examples := append(focus.FindAllSubmatch(script, -1), focus.FindAllSubmatch(doc, -1)...)
	if len(examples) < 2 {
		t.Fatalf("found %d -ginkgo.focus examples in hack/kind-e2e.sh and docs/kind-e2e.md, want both", len(examples))
	}
	for _, m := range examples {
		cmd := exec.Command("go", "test", "-count=1", "./test/e2e/", "-ginkgo.dry-run", "-ginkgo.fail-on-empty",
			"-ginkgo.focus="+string(m[1]))
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("hack/kind-e2e.sh -ginkgo.focus=%s runs no spec of test/e2e: %v\n%s", m[1], err, out)
		}
	}
}

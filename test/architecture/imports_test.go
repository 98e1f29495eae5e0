// Package architecture holds the import rules of docs/architecture.md as a test: a forbidden
// import fails `make test` instead of waiting for a reviewer to notice it.
package architecture

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

const module = "github.com/videogen-dev/videogen-operator"

// pkg is what `go list -json` says of one package of the module.
type pkg struct {
	ImportPath string
	Imports    []string // direct imports of its non-test files
	Deps       []string // everything its non-test files link, transitively
}

// rel is a package's path inside the module ("" for packages outside it).
func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

func under(path string, dirs ...string) bool {
	r, ok := rel(path)
	if !ok {
		return false
	}
	for _, d := range dirs {
		if r == d || strings.HasPrefix(r, d+"/") {
			return true
		}
	}
	return false
}

func isKubernetes(path string) bool {
	return strings.HasPrefix(path, "k8s.io/") || strings.HasPrefix(path, "sigs.k8s.io/")
}

func listModule(t *testing.T) map[string]pkg {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	if len(pkgs) < 40 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

// rule is one line of docs/architecture.md's "must never import" table.
type rule struct {
	name string
	// applies selects the packages the rule is about.
	applies func(path string) bool
	// transitive: the rule is about everything linked, not only direct imports.
	transitive bool
	// forbidden reports whether importing path breaks the rule.
	forbidden func(path string) bool
}

// testSupport are the packages that exist for tests (doubles, fixtures, stack bootstraps):
// no shipped binary may link them.
var testSupport = []string{"internal/testbackend", "internal/jobtest", "internal/stacktest", "internal/versity", "internal/metricnames", "internal/testenv/envsuite", "internal/connectors/connectortest"}

var rules = []rule{
	{
		name:       "the reference worker speaks the backend protocol and knows nothing of Kubernetes or the operator",
		applies:    func(p string) bool { return under(p, "cmd/worker", "internal/worker", "internal/generation/protocol") },
		transitive: true,
		forbidden: func(p string) bool {
			return isKubernetes(p) || under(p, "api", "controllers", "apiserver", "internal/generation/httpbackend", "internal/ledger")
		},
	},
	{
		name:       "payment connectors verify and normalize bytes: no Kubernetes, no operator types",
		applies:    func(p string) bool { return under(p, "internal/connectors") },
		transitive: true,
		forbidden:  func(p string) bool { return isKubernetes(p) || under(p, "api", "controllers", "apiserver") },
	},
	{
		name:      "the API types import nothing else of the module",
		applies:   func(p string) bool { return under(p, "api") },
		forbidden: func(p string) bool { _, in := rel(p); return in && !under(p, "api") },
	},
	{
		name:      "controllers and the REST apiserver never import each other",
		applies:   func(p string) bool { return under(p, "controllers") },
		forbidden: func(p string) bool { return under(p, "apiserver", "cmd") },
	},
	{
		name:      "controllers and the REST apiserver never import each other",
		applies:   func(p string) bool { return under(p, "apiserver") },
		forbidden: func(p string) bool { return under(p, "controllers", "cmd") },
	},
	{
		name: "internal packages are parts: they never import the processes that assemble them",
		applies: func(p string) bool {
			return under(p, "internal") && !under(p, append(testSupport, "internal/localstack")...)
		},
		forbidden: func(p string) bool { return under(p, "controllers", "apiserver", "cmd") },
	},
	{
		name: "shipped binaries link no test double or fixture",
		applies: func(p string) bool {
			return slices.Contains([]string{"cmd/manager", "cmd/apiserver", "cmd/worker", "cmd/videogenctl"}, strings.TrimPrefix(p, module+"/"))
		},
		transitive: true,
		forbidden:  func(p string) bool { return under(p, testSupport...) },
	},
}

func TestNoForbiddenImports(t *testing.T) {
	pkgs := listModule(t)
	for _, r := range rules {
		matched := 0
		for _, p := range pkgs {
			if !r.applies(p.ImportPath) {
				continue
			}
			matched++
			imports := p.Imports
			if r.transitive {
				imports = p.Deps
			}
			for _, imp := range imports {
				if r.forbidden(imp) {
					t.Errorf("%s imports %s: %s (docs/architecture.md)", p.ImportPath, imp, r.name)
				}
			}
		}
		if matched == 0 {
			t.Errorf("rule %q applies to no package: a move left it checking nothing", r.name)
		}
	}
}

// The rules can fail: each one's forbidden set catches an import a careless change could add.
func TestRulesCatchWhatTheyForbid(t *testing.T) {
	for _, c := range []struct {
		from, to string
	}{
		{module + "/cmd/worker", "k8s.io/apimachinery/pkg/types"},
		{module + "/internal/worker/server", module + "/api/v1alpha1"},
		{module + "/internal/connectors/stripe", "sigs.k8s.io/controller-runtime/pkg/client"},
		{module + "/api/v1alpha1", module + "/internal/pricing"},
		{module + "/controllers", module + "/apiserver"},
		{module + "/apiserver", module + "/controllers"},
		{module + "/internal/taskview", module + "/apiserver"},
		{module + "/cmd/manager", module + "/internal/testbackend"},
		{module + "/internal/ledger", module + "/controllers"},
	} {
		caught := false
		for _, r := range rules {
			if r.applies(c.from) && r.forbidden(c.to) {
				caught = true
			}
		}
		if !caught {
			t.Errorf("no rule forbids %s → %s", c.from, c.to)
		}
	}
}

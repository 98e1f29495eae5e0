package manifests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// The condition types each kind sets: `kubectl explain <kind>.status.conditions` names them all.
var conditionTypes = map[string][]string{
	"VideoTask": {videogenv1alpha1.ConditionAccepted, videogenv1alpha1.ConditionDispatched,
		videogenv1alpha1.ConditionSucceeded, videogenv1alpha1.ConditionFailed},
	"PointAccount":  {videogenv1alpha1.ConditionReady, videogenv1alpha1.ConditionFunded},
	"PointTopUp":    {videogenv1alpha1.ConditionApplied},
	"PaymentEvent":  {videogenv1alpha1.ConditionProcessed, videogenv1alpha1.ConditionForwarded},
	"Template":      {videogenv1alpha1.ConditionReady},
	"ShortTemplate": {videogenv1alpha1.ConditionReady},
}

// A line that starts a list item, which may follow a line of its paragraph.
var listItem = regexp.MustCompile(`^\s*([-*]|\d+\.)\s`)

// A figure with a unit of time or rate, as benchmark results are written.
var figure = regexp.MustCompile(`\d+(\.\d+)?\s?(ms|µs|ns|tasks/s|/s|%)(\W|$)|\bbenchmark`)

// What `kubectl explain` shows is written for users: prose without line breaks inside a
// paragraph (controller-gen keeps those of the Go comments; hack/crddoc joins them), no
// benchmark figures, and every condition type of the kind.
func TestExplainTextsReadAsProse(t *testing.T) {
	seen := map[string]bool{}
	for _, crd := range baseCRDs(t) {
		kind := crd.Spec.Names.Kind
		seen[kind] = true
		for _, v := range crd.Spec.Versions {
			schema := v.Schema.OpenAPIV3Schema
			walkDescriptions(kind, schema, func(at, d string) {
				lines := strings.Split(d, "\n")
				for i := 1; i < len(lines); i++ {
					if lines[i] != "" && lines[i-1] != "" && !listItem.MatchString(lines[i]) {
						t.Errorf("%s: a line break inside a paragraph (make manifests joins them): %q", at, d)
						break
					}
				}
				if figure.MatchString(d) {
					t.Errorf("%s: reads like a benchmark figure: %q", at, d)
				}
			})
			conds := schema.Properties["status"].Properties["conditions"]
			for _, want := range conditionTypes[kind] {
				if !regexp.MustCompile(`\b` + want + `\b`).MatchString(conds.Description) {
					t.Errorf("%s.status.conditions does not name the %s condition: %q", kind, want, conds.Description)
				}
			}
		}
	}
	for kind := range conditionTypes {
		if !seen[kind] {
			t.Errorf("no CRD for %s", kind)
		}
	}
}

func walkDescriptions(at string, s *apiextensionsv1.JSONSchemaProps, visit func(at, description string)) {
	if s == nil {
		return
	}
	if s.Description != "" {
		visit(at, s.Description)
	}
	for name, p := range s.Properties {
		walkDescriptions(at+"."+name, &p, visit)
	}
	if s.Items != nil {
		walkDescriptions(at+"[]", s.Items.Schema, visit)
	}
	if s.AdditionalProperties != nil {
		walkDescriptions(at+"{}", s.AdditionalProperties.Schema, visit)
	}
}

// What `kubectl explain` shows names fields by their JSON names and kinds by their kinds: never
// a Go type or constant of the API package (VideoTaskSpec, StageStatus, MaxPoints), which a
// kubectl user has no way to look up. Every field says what it is.
func TestExplainTextsNameNoGoIdentifiers(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	goNames := apiGoNames(t, filepath.Join(root, "api", "v1alpha1"))
	crds := baseCRDs(t)
	for _, crd := range crds {
		delete(goNames, crd.Spec.Names.Kind) // a kind is what users call it
		for _, v := range crd.Spec.Versions {
			// A field's name, capitalized to start its sentence ("Capability is …"), is the field.
			walkFields("", v.Schema.OpenAPIV3Schema, func(at string, _ *apiextensionsv1.JSONSchemaProps) {
				name := at[strings.LastIndex(at, ".")+1:]
				delete(goNames, strings.ToUpper(name[:1])+name[1:])
			})
		}
	}
	word := regexp.MustCompile(`[A-Za-z][A-Za-z0-9]*`)
	for _, crd := range crds {
		kind := crd.Spec.Names.Kind
		for _, v := range crd.Spec.Versions {
			walkDescriptions(kind, v.Schema.OpenAPIV3Schema, func(at, d string) {
				for _, w := range word.FindAllString(d, -1) {
					if goNames[w] {
						t.Errorf("%s: names the Go identifier %s: %q", at, w, d)
					}
				}
			})
			walkFields(kind, v.Schema.OpenAPIV3Schema, func(at string, s *apiextensionsv1.JSONSchemaProps) {
				if s.Description == "" {
					t.Errorf("%s: no description (kubectl explain shows <no description>)", at)
				}
			})
		}
	}
}

// apiGoNames returns the exported types and constants declared in the Go files of dir, but for
// names that are also a constant's value (a reason such as DeliveryFailed), which users see.
func apiGoNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	names, values := map[string]bool{}, map[string]bool{}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || (g.Tok != token.TYPE && g.Tok != token.CONST) {
				continue
			}
			for _, spec := range g.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						names[s.Name.Name] = true
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							names[n.Name] = true
						}
					}
					for _, v := range s.Values {
						if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
							if v, err := strconv.Unquote(lit.Value); err == nil {
								values[v] = true
							}
						}
					}
				}
			}
		}
	}
	for v := range values {
		delete(names, v)
	}
	if len(names) == 0 {
		t.Fatalf("no exported names in %s", dir)
	}
	return names
}

// walkFields visits every property below s (not s itself, nor the standard apiVersion, kind
// and metadata, which Kubernetes describes).
func walkFields(at string, s *apiextensionsv1.JSONSchemaProps, visit func(at string, s *apiextensionsv1.JSONSchemaProps)) {
	if s == nil {
		return
	}
	for name, p := range s.Properties {
		if at != "" && !strings.Contains(at, ".") && (name == "apiVersion" || name == "kind" || name == "metadata") {
			continue
		}
		visit(at+"."+name, &p)
		walkFields(at+"."+name, &p, visit)
	}
	if s.Items != nil {
		walkFields(at+"[]", s.Items.Schema, visit)
	}
}

// The capability a VideoTask field is required for (the CRD's rules refuse a task without it):
// `kubectl explain videotask.spec.<field>` says so, rather than leaving the user to find out
// from a refusal.
var requiredFor = map[string][]string{
	"templateRef":           {"video.short", "video.template", "image.pose"},
	"duration":              {"video.template"},
	"inputs.faceImageURL":   {"video.short", "image.pose"},
	"inputs.sourceVideoURL": {"video.eraser"},
}

func TestExplainSaysWhichCapabilityNeedsAField(t *testing.T) {
	crd := baseCRD(t, "videogen.dev_videotasks.yaml")
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	rules := ""
	for _, r := range spec.XValidations {
		rules += r.Rule + "\n"
	}
	for field, capabilities := range requiredFor {
		s := spec
		for _, name := range strings.Split(field, ".") {
			s = s.Properties[name]
		}
		for _, c := range capabilities {
			if !strings.Contains(rules, "'"+c+"'") || !strings.Contains(rules, field) {
				t.Errorf("spec's rules no longer require %s for %s: update this table", field, c)
			}
			if !strings.Contains(s.Description, "required for") || !strings.Contains(s.Description, c) {
				t.Errorf("spec.%s does not say it is required for %s: %q", field, c, s.Description)
			}
		}
	}
}

package apiserver

import (
	"context"
	"encoding/json"
	"k8s.io/utils/ptr"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// crdValidator checks a ShortTemplate as the kube-apiserver does on create: the CRD's
// OpenAPI schema (lengths, patterns, bounds) and its CEL rules.
type crdValidator struct {
	schema     validation.SchemaValidator
	structural *structuralschema.Structural
	rules      *cel.Validator
}

func newCRDValidator(t testing.TB) crdValidator {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", "videogen.dev_shorttemplates.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	var props apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, &props, nil); err != nil {
		t.Fatal(err)
	}
	sv, _, err := validation.NewSchemaValidator(&props)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := structuralschema.NewStructural(&props)
	if err != nil {
		t.Fatal(err)
	}
	return crdValidator{schema: sv, structural: ss, rules: cel.NewValidator(ss, true, celconfig.PerCallLimit)}
}

// errors returns what the kube-apiserver would refuse in spec.
func (v crdValidator) errors(spec videogenv1alpha1.ShortTemplateSpec) field.ErrorList {
	raw, _ := json.Marshal(map[string]any{"apiVersion": "videogen.dev/v1alpha1", "kind": "ShortTemplate",
		"metadata": map[string]any{"name": "ushort-x", "namespace": "a"}, "spec": spec})
	var obj map[string]any
	_ = json.Unmarshal(raw, &obj)
	errs := validation.ValidateCustomResource(nil, obj, v.schema)
	celErrs, _ := v.rules.Validate(context.Background(), nil, v.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// checkShortTemplate runs the checks of POST /v1/short-templates on a decoded body.
func checkShortTemplate(req *shortTemplateRequest) (videogenv1alpha1.ShortTemplateSpec, error) {
	var c fieldChecker
	c.required("name", req.Name)
	c.required("target_url", req.TargetURL)
	c.optional("cover_url", req.CoverURL)
	spec := videogenv1alpha1.ShortTemplateSpec{}
	if err := c.result(); err != nil {
		return spec, err
	}
	s := &Server{}
	return spec, s.applyShortTemplate(&spec, req)
}

// Each rule of the CRD, broken by a value the REST checks see as sent: they refuse it first,
// naming the request field, so a client never meets the kube-apiserver's message.
func TestShortTemplateChecksRefuseWhatTheCRDRefuses(t *testing.T) {
	crd := newCRDValidator(t)
	ok := videogenv1alpha1.ShortTemplateSpec{DisplayName: "Intro", TargetURL: "https://cdn.example.com/t.mp4"}
	str := func(s string) *string { return &s }
	dur := func(d int32) *int32 { return &d }
	cases := []struct {
		rule  string
		field string
		spec  func(*videogenv1alpha1.ShortTemplateSpec)
		req   shortTemplateRequest
	}{
		{"displayName minLength", "name", func(s *videogenv1alpha1.ShortTemplateSpec) { s.DisplayName = "" }, shortTemplateRequest{Name: str("")}},
		{"displayName maxLength", "name", func(s *videogenv1alpha1.ShortTemplateSpec) { s.DisplayName = strings.Repeat("é", 129) },
			shortTemplateRequest{Name: str(strings.Repeat("é", 129))}},
		{"displayName pattern", "name", func(s *videogenv1alpha1.ShortTemplateSpec) { s.DisplayName = "a\u0085b" }, shortTemplateRequest{Name: str("a\u0085b")}},
		{"displayName pattern", "name", func(s *videogenv1alpha1.ShortTemplateSpec) { s.DisplayName = "a\u2066b" }, shortTemplateRequest{Name: str("a\u2066b")}},
		{"displayName not blank", "name", func(s *videogenv1alpha1.ShortTemplateSpec) { s.DisplayName = "\u00a0\u3000" }, shortTemplateRequest{Name: str("\u00a0\u3000")}},
		{"targetURL pattern", "target_url", func(s *videogenv1alpha1.ShortTemplateSpec) { s.TargetURL = "ftp://cdn.example.com/t.mp4" },
			shortTemplateRequest{TargetURL: str("ftp://cdn.example.com/t.mp4")}},
		{"targetURL pattern", "target_url", func(s *videogenv1alpha1.ShortTemplateSpec) { s.TargetURL = "https:cdn.example.com/t.mp4" },
			shortTemplateRequest{TargetURL: str("https:cdn.example.com/t.mp4")}},
		{"targetURL maxLength", "target_url", func(s *videogenv1alpha1.ShortTemplateSpec) { s.TargetURL = longTestURL(2049) },
			shortTemplateRequest{TargetURL: str(longTestURL(2049))}},
		{"coverURL pattern", "cover_url", func(s *videogenv1alpha1.ShortTemplateSpec) { s.CoverURL = "//cdn.example.com/c.jpg" },
			shortTemplateRequest{CoverURL: str("//cdn.example.com/c.jpg")}},
		{"coverURL maxLength", "cover_url", func(s *videogenv1alpha1.ShortTemplateSpec) { s.CoverURL = longTestURL(2049) },
			shortTemplateRequest{CoverURL: str(longTestURL(2049))}},
		{"duration minimum", "duration", func(s *videogenv1alpha1.ShortTemplateSpec) { s.Duration = dur(0) }, shortTemplateRequest{Duration: ptr.To[wholeNumber](0)}},
		{"duration maximum", "duration", func(s *videogenv1alpha1.ShortTemplateSpec) { s.Duration = dur(3601) }, shortTemplateRequest{Duration: ptr.To[wholeNumber](3601)}},
	}
	for _, c := range cases {
		spec := ok
		c.spec(&spec)
		if errs := crd.errors(spec); len(errs) == 0 {
			t.Errorf("%s: the CRD accepts %+v; the case no longer breaks the rule", c.rule, spec)
		}
		req := shortTemplateRequest{Name: str(ok.DisplayName), TargetURL: str(ok.TargetURL)}
		if c.req.Name != nil {
			req.Name = c.req.Name
		}
		if c.req.TargetURL != nil {
			req.TargetURL = c.req.TargetURL
		}
		req.CoverURL, req.Duration = c.req.CoverURL, c.req.Duration
		_, err := checkShortTemplate(&req)
		if err == nil {
			t.Errorf("%s: the REST checks accept what the CRD refuses", c.rule)
			continue
		}
		if !strings.Contains(err.Error(), `"`+c.field+`"`) || strings.Contains(err.Error(), "spec.") {
			t.Errorf("%s: the refusal %q does not name field %q", c.rule, err, c.field)
		}
	}
}

// Whatever the REST checks accept, the CRD accepts: no request reaches the kube-apiserver's
// refusal. `go test -fuzz FuzzShortTemplateAcceptedByTheCRD ./apiserver/` looks further.
func FuzzShortTemplateAcceptedByTheCRD(f *testing.F) {
	crd := newCRDValidator(f)
	f.Add("Intro", "https://cdn.example.com/t.mp4", "", int32(0))
	f.Add(strings.Repeat("é", 128), longTestURL(2048), longTestURL(2048), int32(3600))
	f.Add(" \u180e ", "HTTPS://ＣＤＮ.example.com/a b", "https://[2001:db8::1]/c.jpg", int32(1))
	f.Add("\u00a0x\u0085", "https://cdn.example.com/\u202e", "http://xn--nxasmq6b.com/c", int32(12))
	f.Fuzz(func(t *testing.T, name, target, cover string, duration int32) {
		req := shortTemplateRequest{Name: &name, TargetURL: &target}
		if cover != "" {
			req.CoverURL = &cover
		}
		if duration != 0 {
			req.Duration = ptr.To(wholeNumber(duration))
		}
		spec, err := checkShortTemplate(&req)
		if err != nil {
			return
		}
		if errs := crd.errors(spec); len(errs) > 0 {
			t.Fatalf("the REST checks accept %q, %q, %q, %d; the CRD refuses it: %v", name, target, cover, duration, errs.ToAggregate())
		}
	})
}

// longTestURL is an https URL of n characters.
func longTestURL(n int) string {
	const prefix = "https://cdn.example.com/"
	return prefix + strings.Repeat("a", n-len(prefix))
}

package apiserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/videogen-dev/videogen-operator/apiserver/openapi"
)

// The OpenAPI document is checked against real responses: every response of every test in this
// suite goes through checkAgainstOpenAPI, so an undocumented status or a body that does not
// match its schema fails the test that produced it.

const docURL = "https://videogen.dev/openapi.json"

var (
	specOnce sync.Once
	spec     map[string]any
	schemas  *jsonschema.Compiler
	compiled sync.Map // pointer -> *jsonschema.Schema
)

func loadSpec() {
	specOnce.Do(func() {
		Expect(json.Unmarshal(openapi.Document, &spec)).To(Succeed())
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(openapi.Document))
		Expect(err).NotTo(HaveOccurred())
		schemas = jsonschema.NewCompiler()
		schemas.DefaultDraft(jsonschema.Draft2020)
		Expect(schemas.AddResource(docURL, doc)).To(Succeed())
	})
}

func schemaAt(pointer string) *jsonschema.Schema {
	if s, ok := compiled.Load(pointer); ok {
		return s.(*jsonschema.Schema)
	}
	s, err := schemas.Compile(docURL + "#" + pointer)
	Expect(err).NotTo(HaveOccurred(), pointer)
	compiled.Store(pointer, s)
	return s
}

// checkAgainstOpenAPI validates one real response against the document.
func checkAgainstOpenAPI(method, path string, r response) {
	GinkgoHelper()
	loadSpec()
	path, _, _ = strings.Cut(path, "?")
	tmpl, ok := matchPath(path)
	if !ok {
		if r.Status >= 400 && r.Header.Get("Content-Type") == "application/json" {
			validate("/components/schemas/Error", r)
		}
		return // routes outside the documented API (blobs)
	}
	item := spec["paths"].(map[string]any)[tmpl].(map[string]any)
	op, ok := item[strings.ToLower(method)].(map[string]any)
	if !ok {
		expectMethodNotAllowed(method, tmpl, item, r)
		return
	}
	res, ok := op["responses"].(map[string]any)[strconv.Itoa(r.Status)].(map[string]any)
	Expect(ok).To(BeTrue(), "%s %s answered %d, which the OpenAPI document does not list", method, tmpl, r.Status)
	pointer := fmt.Sprintf("/paths/%s/%s/responses/%d", escape(tmpl), strings.ToLower(method), r.Status)
	if ref, ok := res["$ref"].(string); ok {
		pointer = strings.TrimPrefix(ref, "#")
		res = spec["components"].(map[string]any)["responses"].(map[string]any)[pointer[strings.LastIndex(pointer, "/")+1:]].(map[string]any)
	}
	if _, hasBody := res["content"]; !hasBody {
		Expect(r.Body).To(BeEmpty(), "%s %s %d has no documented body", method, tmpl, r.Status)
		return
	}
	validate(pointer+"/content/application~1json/schema", r)
}

// expectMethodNotAllowed checks the answer to a method the document does not list for a path:
// 405 with an Allow header naming exactly the documented methods (and HEAD, served as GET).
func expectMethodNotAllowed(method, tmpl string, item map[string]any, r response) {
	GinkgoHelper()
	Expect(r.Status).To(Equal(http.StatusMethodNotAllowed), "%s %s is not in the OpenAPI document, so it must answer 405", method, tmpl)
	validate("/components/schemas/Error", r)
	var documented []string
	for m := range item {
		switch m {
		case "get":
			documented = append(documented, "GET", "HEAD")
		case "post", "put", "patch", "delete":
			documented = append(documented, strings.ToUpper(m))
		}
	}
	Expect(strings.Split(r.Header.Get("Allow"), ", ")).To(ConsistOf(documented), "Allow of %s %s", method, tmpl)
}

func validate(pointer string, r response) {
	GinkgoHelper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.Body))
	Expect(err).NotTo(HaveOccurred(), "body is not JSON: %s", r.Body)
	Expect(schemaAt(pointer).Validate(inst)).To(Succeed(), "response %d does not match %s: %s", r.Status, pointer, r.Body)
}

func matchPath(path string) (string, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for tmpl := range spec["paths"].(map[string]any) {
		tparts := strings.Split(strings.Trim(tmpl, "/"), "/")
		if len(tparts) != len(parts) {
			continue
		}
		match := true
		for i := range tparts {
			if !strings.HasPrefix(tparts[i], "{") && tparts[i] != parts[i] {
				match = false
				break
			}
		}
		if match {
			return tmpl, true
		}
	}
	return "", false
}

func escape(p string) string { return strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1") }

var _ = Describe("OpenAPI document", func() {
	It("is served at /v1/openapi.json and is OpenAPI 3.1", func() {
		resp := api.get("/v1/openapi.json", "")
		Expect(resp.Status).To(Equal(http.StatusOK))
		Expect(resp.JSON()).To(HaveKeyWithValue("openapi", "3.1.0"))
	})

	It("documents every route the server has", func() {
		loadSpec()
		for _, route := range []string{"GET /v1/templates", "POST /v1/videos/short", "POST /v1/videos/eraser", "POST /v1/videos/template",
			"POST /v1/images/pose", "GET /v1/tasks", "GET /v1/tasks/{id}", "POST /v1/tasks/{id}/cancel", "GET /v1/balance",
			"GET /v1/short-templates", "POST /v1/short-templates", "PATCH /v1/short-templates/{id}", "DELETE /v1/short-templates/{id}"} {
			method, path, _ := strings.Cut(route, " ")
			_, ok := spec["paths"].(map[string]any)[path].(map[string]any)[strings.ToLower(method)]
			Expect(ok).To(BeTrue(), route)
		}
	})

	It("catches a response that breaks its schema", func() {
		loadSpec()
		bad := response{Status: 200, Body: []byte(`{"object":"balance","balance":-1}`), Header: http.Header{}}
		err := schemaAt("/components/schemas/Balance").Validate(mustJSON(bad.Body))
		Expect(err).To(HaveOccurred())
	})
})

func mustJSON(b []byte) any {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	Expect(err).NotTo(HaveOccurred())
	return v
}

package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/santhosh-tekuri/jsonschema/v6"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/videogen-dev/videogen-operator/apiserver"
	"github.com/videogen-dev/videogen-operator/apiserver/connectorsecrets"
	"github.com/videogen-dev/videogen-operator/apiserver/openapi"
	"github.com/videogen-dev/videogen-operator/apiserver/webhookingress"
	"github.com/videogen-dev/videogen-operator/internal/httpserver"
	"github.com/videogen-dev/videogen-operator/internal/taskview"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

// The OpenAPI document is checked against real responses: every response of every test in this
// suite goes through checkAgainstOpenAPI, so an undocumented status or a body that does not
// match its schema fails the test that produced it.

const docURL = "https://videogen.dev/openapi.json"

var (
	specOnce sync.Once
	spec     map[string]any
	// schemas compiles lazily; a jsonschema.Compiler is not safe for concurrent use, and specs
	// that send requests concurrently validate their responses concurrently.
	schemasMu sync.Mutex
	schemas   *jsonschema.Compiler
	compiled  = map[string]*jsonschema.Schema{} // by pointer; guarded by schemasMu
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
	schemasMu.Lock()
	defer schemasMu.Unlock()
	if s, ok := compiled[pointer]; ok {
		return s
	}
	s, err := schemas.Compile(docURL + "#" + pointer)
	Expect(err).NotTo(HaveOccurred(), pointer)
	compiled[pointer] = s
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
	expectDocumentedHeaders(fmt.Sprintf("%s %s %d", method, tmpl, r.Status), res, r)
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
	validate("/components/responses/MethodNotAllowed/content/application~1json/schema", r)
	expectDocumentedHeaders(method+" "+tmpl+" 405", spec["components"].(map[string]any)["responses"].(map[string]any)["MethodNotAllowed"].(map[string]any), r)
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

// transportHeaders are HTTP's own headers, which the document does not describe.
var transportHeaders = map[string]bool{"Content-Type": true, "Content-Length": true, "Date": true, "Connection": true}

// expectDocumentedHeaders checks a response's headers against its documented response: every
// header it sends is declared (a client reads only what the document names), and every header
// declared as required is sent.
func expectDocumentedHeaders(what string, res map[string]any, r response) {
	GinkgoHelper()
	declared := map[string]map[string]any{}
	headers, _ := res["headers"].(map[string]any)
	for name, h := range headers {
		if ref, ok := h.(map[string]any)["$ref"].(string); ok {
			h = spec["components"].(map[string]any)["headers"].(map[string]any)[ref[strings.LastIndex(ref, "/")+1:]]
		}
		declared[http.CanonicalHeaderKey(name)] = h.(map[string]any)
	}
	for name := range r.Header {
		if !transportHeaders[name] {
			Expect(declared).To(HaveKey(name), "%s sends the header %s, which the OpenAPI document does not declare", what, name)
		}
	}
	for name, h := range declared {
		if h["required"] == true {
			Expect(r.Header.Get(name)).NotTo(BeEmpty(), "%s: the OpenAPI document declares the header %s required, but it was not sent", what, name)
		}
	}
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

	// Found by trying the API as a client developer would: GET /v1/openapi.json?format=yaml
	// answered 200 with the JSON document, as if the parameter had been honoured, though
	// docs/api.md says every endpoint but the three lists takes no query parameter and refuses
	// one with a 400 naming it.
	It("refuses a query parameter on /v1/openapi.json as every other endpoint does", func() {
		for _, query := range []string{"?format=yaml", "?%zz"} {
			resp := api.get("/v1/openapi.json"+query, "")
			Expect(resp.Status).To(Equal(http.StatusBadRequest), "%s: %s", query, resp.Body)
			Expect(resp.ErrorCode()).To(Equal("invalid_request"))
		}
		Expect(api.get("/v1/openapi.json?format=yaml", "").Message()).To(ContainSubstring(`"format"`))
	})

	It("documents every route the server has", func() {
		loadSpec()
		routes := append(apiserver.New(apiserver.Config{}).Routes(), webhookingress.Pattern)
		Expect(len(routes)).To(BeNumerically(">=", 16))
		for _, route := range routes {
			method, path, _ := strings.Cut(route, " ")
			item, _ := spec["paths"].(map[string]any)[path].(map[string]any)
			_, ok := item[strings.ToLower(method)]
			Expect(ok).To(BeTrue(), "%s is not in the OpenAPI document", route)
		}
	})

	It("describes the payment webhook route's real answers", func() {
		ns := envsuite.Unique("webhooks")
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		const whsec = "whsec_openapi_test"
		Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stripe",
			Labels: map[string]string{connectorsecrets.LabelConnector: "stripe"}}, StringData: map[string]string{"secret": whsec}})).To(Succeed())
		sctx, cancel := context.WithCancel(ctx)
		DeferCleanup(cancel)
		ingress, err := webhookingress.Setup(sctx, cfg, k8sClient, webhookingress.Config{Namespace: ns}, nil)
		Expect(err).NotTo(HaveOccurred())
		mux := http.NewServeMux()
		ingress.Register(mux)
		srv := httptest.NewServer(mux)
		DeferCleanup(srv.Close)

		post := func(path, signature string, body []byte) response {
			req, err := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Content-Type", "application/json")
			if signature != "" {
				req.Header.Set("Stripe-Signature", signature)
			}
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			Expect(err).NotTo(HaveOccurred())
			r := response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
			checkAgainstOpenAPI(http.MethodPost, path, r)
			return r
		}
		body := []byte(`{"id":"evt_openapi","object":"event","type":"charge.refunded","created":1763700000,` +
			`"data":{"object":{"id":"ch_1","object":"charge","amount":500,"amount_refunded":500,"currency":"usd","refunded":true}}}`)
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, []byte(whsec))
		mac.Write([]byte(ts + "." + string(body)))
		signature := "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))

		Expect(post("/v1/webhooks/stripe", "", body).Status).To(Equal(http.StatusUnauthorized))
		Expect(post("/v1/webhooks/nosuch", signature, body).Status).To(Equal(http.StatusNotFound))
		Eventually(func() int { return post("/v1/webhooks/stripe", signature, body).Status }).Should(Equal(http.StatusOK))
		again := post("/v1/webhooks/stripe", signature, body)
		Expect(again.Status).To(Equal(http.StatusOK))
		Expect(string(again.Body)).To(ContainSubstring(`"duplicate":true`))
	})

	// The server's codes are httpjson's constants and the few literals its handlers and
	// net/http's early answers use; each must be one a client reading the enum expects.
	It("lists every error code the server can send in Error.code's enum", func() {
		loadSpec()
		root, err := testenv.ModuleRoot()
		Expect(err).NotTo(HaveOccurred())
		codes := httpjsonCodes(filepath.Join(root, "internal", "httpjson", "httpjson.go"))
		Expect(codes).To(ContainElements("invalid_request", "request_timeout", "request_header_fields_too_large"))
		// The Event Service on the same port is a Connect API with its own codes, not this document's.
		for _, dir := range []string{"apiserver", "apiserver/webhookingress", "apiserver/connectorsecrets", "internal/httpserver"} {
			codes = append(codes, literalCodes(filepath.Join(root, dir))...)
		}
		Expect(codes).To(ContainElements("account_suspended", "not_implemented"))
		enum := errorCodeEnum()
		for _, code := range codes {
			Expect(enum).To(ContainElement(code), "the server can answer error code %q, which Error.code's enum leaves out", code)
		}
	})

	// Found by trying the API as a client developer would: net/http also answers 417 (an
	// Expect header other than 100-continue) and 505 (a request line of HTTP/2.0 over plain
	// HTTP/1) before any handler runs, which httpserver puts in the envelope, but the document
	// declared neither, so those answers matched no documented status.
	It("declares net/http's early 417 and 505 answers, as the server sends them", func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		hs := httpserver.New("", api.srv.Handler(), httpserver.DefaultTimeouts())
		go func() { _ = hs.Serve(httpserver.Listener(l)) }()
		DeferCleanup(hs.Close)
		for _, tc := range []struct {
			method, path, request string
			status                int
		}{
			{"POST", "/v1/videos/short", "POST /v1/videos/short HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: 2\r\n\r\n{}", http.StatusExpectationFailed},
			{"GET", "/v1/balance", "GET /v1/balance HTTP/2.0\r\nHost: x\r\n\r\n", http.StatusHTTPVersionNotSupported},
		} {
			conn, err := net.Dial("tcp", l.Addr().String())
			Expect(err).NotTo(HaveOccurred())
			_, err = conn.Write([]byte(tc.request))
			Expect(err).NotTo(HaveOccurred())
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			Expect(err).NotTo(HaveOccurred())
			raw, err := io.ReadAll(resp.Body)
			Expect(err).NotTo(HaveOccurred())
			conn.Close()
			r := response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
			Expect(r.Status).To(Equal(tc.status), "%s", raw)
			Expect(r.ErrorCode()).To(Equal("invalid_request"))
			checkAgainstOpenAPI(tc.method, tc.path, r)
		}
	})

	// net/http answers these before any handler runs, whatever the path: 431 for headers too
	// large, 400 for a malformed request (an invalid header name, no Host), 501 for a
	// Transfer-Encoding it does not support, 417 for an Expect other than 100-continue, 505 for
	// an HTTP version it does not speak.
	It("declares 400, 417, 431, 501 and 505 on every operation, since net/http can answer them on any path", func() {
		loadSpec()
		for path, item := range spec["paths"].(map[string]any) {
			for method, op := range item.(map[string]any) {
				responses := op.(map[string]any)["responses"].(map[string]any)
				for _, status := range []string{"400", "417", "431", "501", "505"} {
					Expect(responses).To(HaveKey(status), "%s %s", strings.ToUpper(method), path)
				}
			}
		}
		Expect(spec["components"].(map[string]any)["responses"]).To(HaveKey("MethodNotAllowed"))
	})

	It("requires every field of the task view that is always sent", func() {
		loadSpec()
		task := spec["components"].(map[string]any)["schemas"].(map[string]any)["Task"].(map[string]any)
		props := task["properties"].(map[string]any)
		for name, v := range map[string]any{
			"Task":    taskview.Task{},
			"webhook": taskview.Webhook{},
			"phases":  taskview.TaskPhase{},
		} {
			schema := map[string]map[string]any{
				"Task":    task,
				"webhook": props["webhook"].(map[string]any)["oneOf"].([]any)[1].(map[string]any),
				"phases":  props["phases"].(map[string]any)["items"].(map[string]any),
			}[name]
			t := reflect.TypeOf(v)
			for i := range t.NumField() {
				tag := t.Field(i).Tag.Get("json")
				if field, opts, _ := strings.Cut(tag, ","); !strings.Contains(opts, "omitempty") {
					Expect(schema["required"]).To(ContainElement(field), "%s.%s is always sent, so the document must require it", name, field)
				}
			}
		}
	})

	// docs/api.md's Request limits are the server's (limits.go, which a test ties to the CRDs):
	// the document a client generates its validation from says the same, so what it lets
	// through is not a 400 for a length the document never stated. face is a URL or base64, so
	// only its description can say the URL's limit.
	It("declares on every request body field the length the server accepts", func() {
		loadSpec()
		schemas := spec["components"].(map[string]any)["schemas"].(map[string]any)
		var bodies []string
		for _, item := range spec["paths"].(map[string]any) {
			for _, op := range item.(map[string]any) {
				op, _ := op.(map[string]any)
				body, _ := op["requestBody"].(map[string]any)
				content, _ := body["content"].(map[string]any)
				media, _ := content["application/json"].(map[string]any)
				schema, _ := media["schema"].(map[string]any)
				ref, _ := schema["$ref"].(string)
				if name, ok := strings.CutPrefix(ref, "#/components/schemas/"); ok {
					bodies = append(bodies, name)
				}
			}
		}
		Expect(bodies).To(ContainElements("ShortVideoRequest", "EraserRequest", "ShortTemplateCreate", "ShortTemplatePatch"))
		for _, l := range apiserver.FieldLimits {
			if l.Field == "face" {
				continue
			}
			found := false
			for _, name := range bodies {
				prop, ok := schemas[name].(map[string]any)["properties"].(map[string]any)[l.Field].(map[string]any)
				if !ok {
					continue
				}
				found = true
				Expect(prop["maxLength"]).To(BeEquivalentTo(l.Max), "%s.%s: the server refuses more than %d characters", name, l.Field, l.Max)
			}
			Expect(found).To(BeTrue(), "no request body of the document has the field %q", l.Field)
		}
	})

	// The header's schema admits what the server does: 1 to 255 visible ASCII characters.
	It("declares the Idempotency-Key the server accepts", func() {
		loadSpec()
		param := spec["components"].(map[string]any)["parameters"].(map[string]any)["IdempotencyKey"].(map[string]any)
		schema := param["schema"].(map[string]any)
		Expect(schema["minLength"]).To(BeEquivalentTo(1))
		Expect(schema["maxLength"]).To(BeEquivalentTo(255))
		pattern, _ := schema["pattern"].(string)
		Expect(pattern).NotTo(BeEmpty(), "the server accepts only visible ASCII: the document must say so")
		re := regexp.MustCompile(pattern)
		accepts := func(key string) bool {
			r := httptest.NewRequest(http.MethodPost, "/v1/videos/short", nil)
			r.Header.Set("Idempotency-Key", key)
			_, err := apiserver.IdempotencyKey(r)
			return err == nil
		}
		for _, c := range []rune{0x00, 0x09, 0x1f, ' ', '!', 'a', '~', 0x7f, 0x80, 0xe9, 0x202e} {
			key := "k" + string(c) + "k"
			Expect(re.MatchString(key)).To(Equal(accepts(key)), "key %q", key)
		}
	})

	// Found by trying the API as a client developer would: two Authorization headers, or a
	// bearer token over bearer.MaxTokenBytes, are answered 400 invalid_request with
	// WWW-Authenticate: Bearer realm="videogen", error="invalid_request" (RFC 6750) on every
	// operation that takes an API key, but the document declared only X-Request-Id on those
	// 400s, so a client reading the document did not know the header, and the shared
	// BadRequest response described only net/http's early answers.
	It("declares the WWW-Authenticate of a 400 for a malformed Authorization on every operation that takes an API key", func() {
		loadSpec()
		long := "vg_" + strings.Repeat("x", 16<<10)
		for path, item := range spec["paths"].(map[string]any) {
			for method, op := range item.(map[string]any) {
				if security, ok := op.(map[string]any)["security"].([]any); ok && len(security) == 0 {
					continue // no API key: webhooks of payment processors, the document itself
				}
				concrete := strings.NewReplacer("{id}", "vt-nosuchtask", "{connector}", "stripe").Replace(path)
				if strings.HasPrefix(path, "/v1/short-templates/") {
					concrete = "/v1/short-templates/ushort_nosuch"
				}
				for what, authorization := range map[string][]string{
					"two Authorization headers": {"Bearer vg_a_b", "Bearer vg_c_d"},
					"a bearer token too long":   {"Bearer " + long},
				} {
					req, err := http.NewRequestWithContext(ctx, strings.ToUpper(method), api.base+concrete, nil)
					Expect(err).NotTo(HaveOccurred())
					req.Header["Authorization"] = authorization
					resp, err := api.http.Do(req)
					Expect(err).NotTo(HaveOccurred())
					raw, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					Expect(err).NotTo(HaveOccurred())
					r := response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
					Expect(r.Status).To(Equal(http.StatusBadRequest), "%s %s with %s: %s", method, concrete, what, raw)
					Expect(r.ErrorCode()).To(Equal("invalid_request"))
					Expect(r.Header.Get("WWW-Authenticate")).To(ContainSubstring(`error="invalid_request"`))
					checkAgainstOpenAPI(strings.ToUpper(method), concrete, r)
				}
			}
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

// httpjsonCodes reads the values of httpjson's Code constants.
func httpjsonCodes(file string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	Expect(err).NotTo(HaveOccurred())
	var codes []string
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && strings.HasPrefix(name.Name, "Code") {
					v, err := strconv.Unquote(lit.Value)
					Expect(err).NotTo(HaveOccurred())
					codes = append(codes, v)
				}
			}
		}
	}
	return codes
}

// literalCode finds an error code written as a literal: WriteError(w, r, status, "code", …)
// or code = "…".
var literalCode = regexp.MustCompile(`WriteError\([^,]+, [^,]+, [^,]+, "([a-z_]+)"|\bcode = "([a-z_]+)"`)

func literalCodes(dir string) []string {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	Expect(err).NotTo(HaveOccurred())
	var codes []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		Expect(err).NotTo(HaveOccurred())
		for _, m := range literalCode.FindAllStringSubmatch(string(src), -1) {
			codes = append(codes, m[1]+m[2])
		}
	}
	return codes
}

func errorCodeEnum() []any {
	errSchema := spec["components"].(map[string]any)["schemas"].(map[string]any)["Error"].(map[string]any)
	inner := errSchema["properties"].(map[string]any)["error"].(map[string]any)
	return inner["properties"].(map[string]any)["code"].(map[string]any)["enum"].([]any)
}

package apiserver_test

import (
	"net/http"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

var _ = Describe("The Authorization scheme", func() {
	// RFC 9110 §11.1: the scheme is case-insensitive; the Event Service already reads it so.
	DescribeTable("is read case-insensitively",
		func(scheme string, status int) {
			a := newAccount(0)
			resp := api.do(call{method: "GET", path: "/v1/balance", headers: map[string]string{"Authorization": scheme + a.key}})
			Expect(resp.Status).To(Equal(status), string(resp.Body))
		},
		Entry("bearer", "bearer ", http.StatusOK),
		Entry("BEARER", "BEARER ", http.StatusOK),
		Entry("BeArEr with two spaces", "BeArEr  ", http.StatusOK),
		Entry("Basic", "Basic ", http.StatusUnauthorized),
		Entry("Bearer glued to the key", "Bearer", http.StatusUnauthorized),
	)
})

var _ = Describe("Content types", func() {
	It("reads curl -d's form label as JSON when the body is a JSON object, and UTF-8 in any spelling", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](10), nil)
		body := `{"template_id":"` + tmpl + `","face":"https://cdn.example.com/f.jpg"}`
		for _, ct := range []string{"application/x-www-form-urlencoded", "application/json; charset=UTF-8", "application/json;charset=\"utf-8\""} {
			resp := api.do(call{method: "POST", path: "/v1/videos/short", key: a.key, body: body, headers: map[string]string{"Content-Type": ct}})
			Expect(resp.Status).To(Equal(http.StatusAccepted), "%s: %s", ct, resp.Body)
		}
		expectCharged(a.ns, 70, 30)
	})

	// The service reads a body as sent. Before, a plain body labelled gzip was accepted under
	// its false label and a gzipped one was "malformed JSON at byte 1: invalid character '\x1f'".
	It("refuses a body with a content coding with 415 and Accept-Encoding: identity, and takes Content-Encoding: identity", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](10), nil)
		body := `{"template_id":"` + tmpl + `","face":"https://cdn.example.com/f.jpg"}`
		for _, ce := range []string{"gzip", "br", "identity, gzip"} {
			resp := api.do(call{method: "POST", path: "/v1/videos/short", key: a.key, body: body, headers: map[string]string{"Content-Encoding": ce}})
			Expect(resp.Status).To(Equal(http.StatusUnsupportedMediaType), "%s: %s", ce, resp.Body)
			Expect(resp.ErrorCode()).To(Equal("unsupported_media_type"))
			Expect(resp.Message()).To(ContainSubstring("send the body uncompressed"))
			Expect(resp.Header.Get("Accept-Encoding")).To(Equal("identity"))
		}
		st := api.do(call{method: "POST", path: "/v1/short-templates", key: a.key,
			body:    map[string]any{"name": "x", "target_url": "https://cdn.example.com/t.mp4"},
			headers: map[string]string{"Content-Encoding": "deflate"}})
		Expect(st.Status).To(Equal(http.StatusUnsupportedMediaType), string(st.Body))
		var own videogenv1alpha1.ShortTemplateList
		Expect(k8sClient.List(ctx, &own, client.InNamespace(a.ns))).To(Succeed())
		Expect(own.Items).To(BeEmpty())
		Expect(tasksIn(a.ns)).To(BeEmpty())
		expectCharged(a.ns, 100, 0)

		resp := api.do(call{method: "POST", path: "/v1/videos/short", key: a.key, body: body, headers: map[string]string{"Content-Encoding": "Identity"}})
		Expect(resp.Status).To(Equal(http.StatusAccepted), string(resp.Body))
		expectCharged(a.ns, 90, 10)
	})
})

var _ = Describe("Query parameters", func() {
	// A filter the endpoint does not have, or a misspelt one, was read as absent: the answer
	// listed everything, as if it were what was asked for.
	DescribeTable("are refused when unknown, repeated or malformed",
		func(path, message string) {
			a := newAccount(0)
			resp := api.get(path, a.key)
			Expect(resp.Status).To(Equal(http.StatusBadRequest), string(resp.Body))
			Expect(resp.ErrorCode()).To(Equal("invalid_request"))
			Expect(resp.Message()).To(ContainSubstring(message))
		},
		Entry("a status filter on tasks", "/v1/tasks?status=failed", `unknown query parameter "status"; this endpoint takes limit, after`),
		Entry("a misspelt capability", "/v1/templates?capabilty=image.pose", `unknown query parameter "capabilty"; this endpoint takes capability`),
		Entry("a limit on short templates, which are listed whole", "/v1/short-templates?limit=5",
			`unknown query parameter "limit"; this endpoint takes no query parameters`),
		Entry("limit twice", "/v1/tasks?limit=1&limit=100", `query parameter "limit" appears more than once`),
		Entry("capability twice", "/v1/templates?capability=image.pose&capability=video.short", `query parameter "capability" appears more than once`),
		Entry("a broken % escape", "/v1/tasks?limit=%zz", "the query string is malformed"),
		Entry("a ; separator", "/v1/tasks?limit=1;after=x", "the query string is malformed"),
		Entry("20,000 parameters (more than net/url reads)", "/v1/tasks?limit=1&"+strings.Repeat("p=1&", 20000),
			`unknown query parameter "p"`),
	)

	It("still takes the known ones, and empty ones as absent", func() {
		a := newAccount(0)
		for _, path := range []string{"/v1/tasks?limit=5&after=", "/v1/tasks?", "/v1/templates?capability=image.pose", "/v1/templates?capability=", "/v1/short-templates?"} {
			Expect(api.get(path, a.key).Status).To(Equal(http.StatusOK), path)
		}
	})
})

var _ = Describe("A suspended account", func() {
	It("may read, cancel, delete and rotate its webhook secret, but not create or change templates", func() {
		a := newAccount(100)
		created := api.post("/v1/short-templates", a.key, map[string]any{"name": "Before", "target_url": "https://cdn.example.com/t.mp4"})
		Expect(created.Status).To(Equal(http.StatusCreated), string(created.Body))
		id := created.JSON()["id"].(string)
		setSuspended(a.ns, true)

		// Suspension is checked before the body: an empty one probes without creating anything.
		Eventually(func() int { return api.post("/v1/short-templates", a.key, map[string]any{}).Status }).Should(Equal(http.StatusForbidden))
		refused := api.post("/v1/short-templates", a.key, map[string]any{"name": "During", "target_url": "https://cdn.example.com/t.mp4"})
		Expect(refused.ErrorCode()).To(Equal("account_suspended"))
		patch := api.do(call{method: "PATCH", path: "/v1/short-templates/" + id, key: a.key, body: map[string]any{"name": "Renamed"}})
		Expect(patch.Status).To(Equal(http.StatusForbidden), string(patch.Body))
		Expect(patch.ErrorCode()).To(Equal("account_suspended"))

		Expect(api.get("/v1/short-templates", a.key).Status).To(Equal(http.StatusOK))
		Expect(api.get("/v1/webhook-secret", a.key).Status).To(Equal(http.StatusOK))
		Expect(api.post("/v1/webhook-secret/rotate", a.key, nil).Status).To(Equal(http.StatusOK))
		Expect(api.do(call{method: "DELETE", path: "/v1/short-templates/" + id, key: a.key}).Status).To(Equal(http.StatusNoContent))

		var own videogenv1alpha1.ShortTemplateList
		Expect(k8sClient.List(ctx, &own, client.InNamespace(a.ns))).To(Succeed())
		for _, st := range own.Items {
			Expect(st.Spec.DisplayName).To(Equal("Before"), "nothing was created or renamed while suspended")
		}
	})
})

var _ = Describe("Concurrent webhook secret rotations", func() {
	It("let one win at a time: the others answer 409, and no 200 hands out a secret that was never in force", func() {
		a := newAccount(0)
		original := api.get("/v1/webhook-secret", a.key).JSON()["secret"].(string)

		const n = 20
		answers := make([]response, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				answers[i] = api.post("/v1/webhook-secret/rotate", a.key, nil)
			})
		}
		close(start)
		wg.Wait()

		// Each 200 replaced the secret in force when it began: following previous_secret from
		// the original visits every 200 once and ends at the secret in force now.
		after := map[string]string{} // previous secret → the secret that replaced it
		conflicts := 0
		for _, r := range answers {
			switch r.Status {
			case http.StatusOK:
				prev, ok := r.JSON()["previous_secret"].(string)
				Expect(ok).To(BeTrue(), string(r.Body))
				Expect(after).NotTo(HaveKey(prev), "two rotations both replaced %s", prev)
				after[prev] = r.JSON()["secret"].(string)
			case http.StatusConflict:
				Expect(r.ErrorCode()).To(Equal("conflict"))
				conflicts++
			default:
				Fail("rotation answered " + string(r.Body))
			}
		}
		Expect(after).NotTo(BeEmpty())
		Expect(conflicts).To(BeNumerically(">", 0), "20 rotations at once should collide")
		current := original
		for range after {
			next, ok := after[current]
			Expect(ok).To(BeTrue(), "a 200's secret was overwritten without being the previous of another")
			current = next
		}
		Expect(api.get("/v1/webhook-secret", a.key).JSON()["secret"]).To(Equal(current))
	})
})

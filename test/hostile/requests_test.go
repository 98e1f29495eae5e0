package hostile

import (
	"net/http"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// missing is a loopback URL of exactly n characters on the worker's blob store, where nothing
// is: a task given it fails fast and is refunded. The local stack allows loopback URLs.
func missing(n int) string {
	prefix := stack.WorkerURL + "/v1/blobs/"
	return prefix + strings.Repeat("a", n-len(prefix))
}

// hook is a URL of exactly n characters on the suite's webhook receiver.
func hook(n int) string {
	prefix := receiver.URL + "/"
	return prefix + strings.Repeat("h", n-len(prefix))
}

// expectRefused sends the request as the refused account and checks the answer.
func expectRefused(status int, code, inMessage, method, path string, body any, headers ...string) {
	GinkgoHelper()
	r := call(method, path, refused.key, body, headers...)
	Expect(r.Status).To(Equal(status), "%s: %.1024s", describe(method, path), r.Body)
	gotCode, message := r.refusal()
	Expect(gotCode).To(Equal(code), describe(method, path))
	Expect(message).To(ContainSubstring(inMessage), describe(method, path))
}

var _ = Describe("Fields at their CRD length limits", func() {
	It("refuses each one character over with a 400 naming it, and takes it at the limit", func() {
		demo := stack.Demo
		over := []struct {
			path, field string
			body        map[string]any
		}{
			{"/v1/videos/short", "face", map[string]any{"template_id": demo.ShortTemplate, "face": missing(2049)}},
			{"/v1/images/pose", "face", map[string]any{"template_id": demo.PoseTemplate, "face": missing(2049)}},
			{"/v1/videos/eraser", "video", map[string]any{"video": missing(2049)}},
			{"/v1/videos/template", "webhook_url", map[string]any{"template_id": demo.TemplateTemplate, "duration": 2, "webhook_url": hook(2049)}},
			{"/v1/videos/short", "webhook_url", map[string]any{"template_id": demo.ShortTemplate, "face": missing(100), "webhook_url": hook(2049)}},
			{"/v1/videos/short", "template_id", map[string]any{"template_id": strings.Repeat("t", 254), "face": missing(100)}},
			{"/v1/videos/template", "template_id", map[string]any{"template_id": strings.Repeat("t", 15<<20), "duration": 2}},
			{"/v1/short-templates", "name", map[string]any{"name": strings.Repeat("é", 129), "target_url": missing(100)}},
			{"/v1/short-templates", "target_url", map[string]any{"name": "t", "target_url": missing(2049)}},
			{"/v1/short-templates", "cover_url", map[string]any{"name": "t", "target_url": missing(100), "cover_url": missing(2049)}},
		}
		for _, o := range over {
			expectRefused(http.StatusBadRequest, "invalid_request", `"`+o.field+`" must be at most`, "POST", o.path, o.body)
		}
		expectRefused(http.StatusBadRequest, "invalid_request", "Idempotency-Key", "POST", "/v1/videos/eraser",
			map[string]any{"video": missing(100)}, "Idempotency-Key", strings.Repeat("k", 256))

		By("taking every field at exactly its limit")
		t := &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{
			Name: strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)}}
		t.Spec = videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityTemplate, DisplayName: strings.Repeat("é", 128),
			MediaURL: missing(100), DurationAdjustable: true, MinDuration: ptr.To[int32](2), MaxDuration: ptr.To[int32](2),
			DurationPrices: map[string]int64{"2": 5}}
		Expect(stack.Client.Create(ctx, t)).To(Succeed())
		st := call("POST", "/v1/short-templates", accepted.key, map[string]any{"name": strings.Repeat("é", 128),
			"target_url": missing(2048), "cover_url": missing(2048)})
		Expect(st.Status).To(Equal(http.StatusCreated), "%.1024s", st.Body)
		stID := st.json()["id"].(string)
		for _, c := range []struct {
			path    string
			body    map[string]any
			headers []string
		}{
			{"/v1/videos/short", map[string]any{"template_id": stID, "face": missing(2048), "webhook_url": hook(2048)}, nil},
			{"/v1/videos/template", map[string]any{"template_id": t.Name, "duration": 2, "webhook_url": hook(2048)}, nil},
			{"/v1/videos/eraser", map[string]any{"video": missing(2048)}, []string{"Idempotency-Key", strings.Repeat("k", 255)}},
		} {
			r := call("POST", c.path, accepted.key, c.body, c.headers...)
			Expect(r.Status).To(Equal(http.StatusAccepted), "%s: %.1024s", c.path, r.Body)
		}
		patched := call("PATCH", "/v1/short-templates/"+stID, accepted.key, map[string]any{"name": strings.Repeat("ü", 128)})
		Expect(patched.Status).To(Equal(http.StatusOK), "%.1024s", patched.Body)

		By("refusing a PATCH one character over, leaving the template as it was")
		for field, value := range map[string]string{"name": strings.Repeat("ü", 129), "target_url": missing(2049), "cover_url": missing(2049)} {
			r := call("PATCH", "/v1/short-templates/"+stID, accepted.key, map[string]any{field: value})
			Expect(r.Status).To(Equal(http.StatusBadRequest), "%s: %.1024s", field, r.Body)
		}
		// The list is read from the apiserver's cache, which may trail the PATCH a moment.
		Eventually(func() any { return call("GET", "/v1/short-templates", accepted.key, nil).json()["data"] }).Should(ContainElement(And(
			HaveKeyWithValue("name", strings.Repeat("ü", 128)), HaveKeyWithValue("target_url", missing(2048)))))
	})
})

var _ = Describe("Field names", func() {
	It("are matched exactly and given once, on every JSON endpoint", func() {
		demo, face := stack.Demo, missing(100)
		var patchID string
		list := call("GET", "/v1/short-templates", accepted.key, nil).json()["data"].([]any)
		if len(list) == 0 {
			r := call("POST", "/v1/short-templates", accepted.key, map[string]any{"name": "keys", "target_url": face})
			Expect(r.Status).To(Equal(http.StatusCreated), "%.1024s", r.Body)
			patchID = r.json()["id"].(string)
		} else {
			patchID = list[0].(map[string]any)["id"].(string)
		}
		bodies := []struct{ method, path, body, message string }{
			{"POST", "/v1/videos/short", `{"Template_ID":"` + demo.ShortTemplate + `","face":"` + face + `"}`, `unknown field "Template_ID"`},
			{"POST", "/v1/videos/short", `{"template_id":"` + demo.ShortTemplate + `","TEMPLATE_ID":"x","face":"` + face + `"}`, `unknown field "TEMPLATE_ID"`},
			{"POST", "/v1/videos/short", `{"template_id":"x","template_id":"` + demo.ShortTemplate + `","face":"` + face + `"}`, `"template_id" appears more than once`},
			{"POST", "/v1/images/pose", `{"template_id":"` + demo.PoseTemplate + `","Face":"` + face + `"}`, `unknown field "Face"`},
			{"POST", "/v1/images/pose", `{"template_id":"` + demo.PoseTemplate + `","face":"` + face + `","face":"` + face + `"}`, `"face" appears more than once`},
			{"POST", "/v1/videos/eraser", `{"Video":"` + face + `"}`, `unknown field "Video"`},
			{"POST", "/v1/videos/eraser", `{"video":"` + face + `","video":"` + face + `"}`, `"video" appears more than once`},
			{"POST", "/v1/videos/template", `{"template_id":"` + demo.TemplateTemplate + `","Duration":2}`, `unknown field "Duration"`},
			{"POST", "/v1/videos/template", `{"template_id":"` + demo.TemplateTemplate + `","duration":2,"duration":10}`, `"duration" appears more than once`},
			{"POST", "/v1/short-templates", `{"Name":"x","target_url":"` + face + `"}`, `unknown field "Name"`},
			{"POST", "/v1/short-templates", `{"name":"a","NAME":"b","target_url":"` + face + `"}`, `unknown field "NAME"`},
			{"POST", "/v1/short-templates", `{"name":"a","name":"b","target_url":"` + face + `"}`, `"name" appears more than once`},
		}
		for _, b := range bodies {
			expectRefused(http.StatusBadRequest, "invalid_request", b.message, b.method, b.path, b.body)
		}
		for _, b := range []struct{ body, message string }{
			{`{"Name":"x"}`, `unknown field "Name"`},
			{`{"name":"a","name":"b"}`, `"name" appears more than once`},
		} {
			r := call("PATCH", "/v1/short-templates/"+patchID, accepted.key, b.body)
			Expect(r.Status).To(Equal(http.StatusBadRequest), "%.1024s", r.Body)
			_, message := r.refusal()
			Expect(message).To(ContainSubstring(b.message))
		}
	})
})

// Host forms of the metadata address and other non-public destinations. The local stack
// allows loopback (its media live there), so loopback forms are not among them.
var ssrfURLs = []string{
	"http://169.254.169.254/latest/meta-data/",
	"http://169。254。169。254/latest",     // ideographic full stops
	"http://１６９.２５４.１６９.２５４/latest",     // full-width digits
	"http://2852039166/latest",          // one decimal number
	"http://0251.0376.0251.0376/latest", // octal
	"http://0xa9.0xfe.0xa9.0xfe/latest", // hex parts
	"http://0xa9fea9fe/latest",          // one hex number
	"http://169.254.43518/latest",       // inet_aton's three parts
	"http://[::ffff:169.254.169.254]/latest",
	"http://[::ffff:a9fe:a9fe]/latest",
	"http://[64:ff9b::a9fe:a9fe]/latest", // NAT64
	"http://[fd00:ec2::254]/latest",      // AWS's IPv6 metadata address
	"http://10.0.0.1/x",
	"http://192.168.1.1/x",
	"http://100.64.0.1/x",
	"http://0.0.0.0/x",
	"https://cdn.example.com:0/x",
	"https://cdn.example.com:99999/x",
	"https://user:pw@cdn.example.com/x",
	"file:///etc/passwd",
	"gopher://169.254.169.254:70/x",
}

var _ = Describe("URL fields", func() {
	It("refuse every SSRF host form, in every field that takes a URL", func() {
		demo, ok := stack.Demo, missing(100)
		fields := []struct {
			method, path, field string
			body                func(u string) map[string]any
		}{
			{"POST", "/v1/videos/short", "face", func(u string) map[string]any { return map[string]any{"template_id": demo.ShortTemplate, "face": u} }},
			{"POST", "/v1/images/pose", "face", func(u string) map[string]any { return map[string]any{"template_id": demo.PoseTemplate, "face": u} }},
			{"POST", "/v1/videos/eraser", "video", func(u string) map[string]any { return map[string]any{"video": u} }},
			{"POST", "/v1/videos/eraser", "webhook_url", func(u string) map[string]any { return map[string]any{"video": ok, "webhook_url": u} }},
			{"POST", "/v1/videos/template", "webhook_url", func(u string) map[string]any {
				return map[string]any{"template_id": demo.TemplateTemplate, "duration": 2, "webhook_url": u}
			}},
			{"POST", "/v1/short-templates", "target_url", func(u string) map[string]any { return map[string]any{"name": "t", "target_url": u} }},
			{"POST", "/v1/short-templates", "cover_url", func(u string) map[string]any {
				return map[string]any{"name": "t", "target_url": ok, "cover_url": u}
			}},
		}
		for _, f := range fields {
			for _, u := range ssrfURLs {
				r := call(f.method, f.path, refused.key, f.body(u))
				Expect(r.Status).To(Equal(http.StatusBadRequest), "%s %s: %.1024s", describe(f.method, f.path), u, r.Body)
				_, message := r.refusal()
				Expect(message).To(ContainSubstring(`"`+f.field+`"`), u)
			}
		}
	})
})

var _ = Describe("Authorization", func() {
	It("reads the Bearer scheme in any case and refuses every other form, in the envelope", func() {
		for _, h := range []string{"bearer ", "BEARER ", "Bearer  ", "bEaReR "} {
			r := call("GET", "/v1/balance", "", nil, "Authorization", h+accepted.key)
			Expect(r.Status).To(Equal(http.StatusOK), "%q: %.1024s", h, r.Body)
		}
		for _, h := range []string{"", "Basic " + accepted.key, "Token " + accepted.key, "Bearer", "Bearer" + accepted.key,
			accepted.key, "Bearer " + accepted.key + "x", "Bearer vg_x_y"} {
			r := call("GET", "/v1/balance", "", nil, "Authorization", h)
			Expect(r.Status).To(Equal(http.StatusUnauthorized), "%q: %.1024s", h, r.Body)
			code, _ := r.refusal()
			Expect(code).To(Equal("invalid_api_key"))
		}
	})
})

var _ = Describe("Concurrent webhook secret rotations", func() {
	It("let one win at a time: the others get 409, and every 200's secret was the one in force", func() {
		original := call("GET", "/v1/webhook-secret", rotating.key, nil).json()["secret"].(string)
		const n = 20
		answers := make([]reply, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				defer GinkgoRecover()
				<-start
				answers[i] = call("POST", "/v1/webhook-secret/rotate", rotating.key, nil)
			})
		}
		close(start)
		wg.Wait()

		replaced := map[string]string{} // previous secret → the one that replaced it
		for _, r := range answers {
			switch r.Status {
			case http.StatusOK:
				prev := r.json()["previous_secret"].(string)
				Expect(replaced).NotTo(HaveKey(prev), "two rotations replaced the same secret")
				replaced[prev] = r.json()["secret"].(string)
			case http.StatusConflict:
				code, _ := r.refusal()
				Expect(code).To(Equal("conflict"))
			default:
				Fail("a rotation answered " + string(r.Body))
			}
		}
		Expect(replaced).NotTo(BeEmpty())
		current := original
		for range replaced {
			Expect(replaced).To(HaveKey(current), "the chain of rotations breaks at %s", current)
			current = replaced[current]
		}
		Expect(call("GET", "/v1/webhook-secret", rotating.key, nil).json()["secret"]).To(Equal(current))
	})
})

var _ = Describe("Bodies that are not UTF-8 JSON", func() {
	It("are refused with 415, and a 5.5 duration with 'must be an integer'", func() {
		demo := stack.Demo
		body := `{"template_id":"` + demo.TemplateTemplate + `","duration":2}`
		expectRefused(http.StatusUnsupportedMediaType, "unsupported_media_type", "UTF-8", "POST", "/v1/videos/template", body,
			"Content-Type", "application/json; charset=utf-16")
		expectRefused(http.StatusUnsupportedMediaType, "unsupported_media_type", "UTF-8", "POST", "/v1/videos/template",
			"\xff\xfe"+strings.Join(strings.Split(body, ""), "\x00")+"\x00")
		expectRefused(http.StatusUnsupportedMediaType, "unsupported_media_type", "JSON", "POST", "/v1/videos/template",
			"template_id="+demo.TemplateTemplate+"&duration=2", "Content-Type", "application/x-www-form-urlencoded")
		expectRefused(http.StatusBadRequest, "invalid_request", `field "duration" must be an integer, not 5.5`, "POST", "/v1/videos/template",
			`{"template_id":"`+demo.TemplateTemplate+`","duration":5.5}`)
		expectRefused(http.StatusBadRequest, "invalid_request", `"name" must not contain control characters`, "POST", "/v1/short-templates",
			`{"name":"a\u0000b","target_url":"`+missing(100)+`"}`)
	})
})

var _ = Describe("Answers", func() {
	It("are in the error envelope wherever the service answers, and echo nothing in full", func() {
		for _, c := range []struct {
			base, method, path string
			status             int
		}{
			{stack.APIURL, "GET", "/v1/tasks/..", http.StatusNotFound},
			{stack.APIURL, "GET", "/v1/tasks/../balance", http.StatusNotFound},
			{stack.APIURL, "GET", "//v1/balance", http.StatusNotFound},
			{stack.APIURL, "GET", "/admin", http.StatusNotFound},
			{stack.APIURL, "GET", "/v1/tasks/" + strings.Repeat("x", 512<<10), http.StatusNotFound},
			{stack.APIURL, "GET", "/v1/blobs/" + strings.Repeat("0", 32) + ".png", http.StatusNotFound},
			{stack.WorkerURL, "GET", "/v1/blobs/" + strings.Repeat("0", 32) + ".png", http.StatusNotFound},
			{stack.WorkerURL, "GET", "/v1/blobs/nothing", http.StatusNotFound},
		} {
			r := callAt(c.base, c.method, c.path, refused.key, nil)
			Expect(r.Status).To(Equal(c.status), "%s %.200s: %.1024s", c.base, c.path, r.Body)
			Expect(r.Header.Get("Location")).To(BeEmpty(), "no redirect")
			r.refusal()
		}
		r := call("GET", "/v1/templates?capability="+strings.Repeat("c", 512<<10), refused.key, nil)
		Expect(r.Status).To(Equal(http.StatusBadRequest))
		r.refusal()
	})
})

// The suspended-account policy: no new work and nothing new for it, but its data, its
// cancellations, its deletions and its webhook secret stay in its hands.
var _ = Describe("A suspended account", func() {
	It("cannot create short templates, and can still rotate its webhook secret", func() {
		// Suspended from the start: top-ups still apply, so newAccount waits for the credit.
		a := newAccountWith("hostile-suspended", videogenv1alpha1.PointAccountSpec{Suspended: true})
		for _, c := range []struct {
			path string
			body map[string]any
		}{
			{"/v1/short-templates", map[string]any{"name": "t", "target_url": missing(100)}},
			{"/v1/videos/eraser", map[string]any{"video": missing(100)}},
		} {
			r := call("POST", c.path, a.key, c.body)
			Expect(r.Status).To(Equal(http.StatusForbidden), "%s: %.1024s", c.path, r.Body)
			code, _ := r.refusal()
			Expect(code).To(Equal("account_suspended"))
		}
		Expect(call("POST", "/v1/webhook-secret/rotate", a.key, nil).Status).To(Equal(http.StatusOK))
		var templates videogenv1alpha1.ShortTemplateList
		Expect(stack.Client.List(ctx, &templates, client.InNamespace(a.name))).To(Succeed())
		Expect(templates.Items).To(BeEmpty())
		var tasks videogenv1alpha1.VideoTaskList
		Expect(stack.Client.List(ctx, &tasks, client.InNamespace(a.name))).To(Succeed())
		Expect(tasks.Items).To(BeEmpty())
		st := pointAccount(a.name).Status
		Expect([]int64{st.Credited, st.Balance, st.Frozen, st.Spent}).To(Equal([]int64{credit, credit, 0, 0}))
	})
})

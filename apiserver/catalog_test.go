package apiserver_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

var _ = Describe("Templates and custom short templates", func() {
	It("lists official templates by capability, with the caller's own short templates", func() {
		a := newAccount(100)
		short := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](12), nil)
		adjustable := template(videogenv1alpha1.CapabilityTemplate, nil, func(s *videogenv1alpha1.TemplateSpec) {
			s.DurationAdjustable, s.MinDuration, s.MaxDuration = true, ptr.To[int32](5), ptr.To[int32](20)
			s.DurationPrices = map[string]int64{"5": 10, "20": 30}
		})
		own := api.post("/v1/short-templates", a.key, map[string]any{"name": "Mine", "target_url": "https://cdn.example.com/mine.mp4"})
		Expect(own.Status).To(Equal(http.StatusCreated), string(own.Body))
		ownID := own.JSON()["id"].(string)

		var shorts map[string]any
		Eventually(func() []any {
			shorts = api.get("/v1/templates?capability=video.short", a.key).JSON()
			return shorts["data"].([]any)
		}).Should(ContainElement(HaveKeyWithValue("id", ownID)))
		Expect(shorts["data"]).To(ContainElement(And(HaveKeyWithValue("id", short), HaveKeyWithValue("price", BeNumerically("==", 12)),
			HaveKeyWithValue("cover_url", "https://cdn.example.com/"+short+".jpg"), HaveKeyWithValue("custom", false),
			HaveKeyWithValue("default_price", BeNil()))))
		Expect(shorts["data"]).To(ContainElement(And(HaveKeyWithValue("id", ownID), HaveKeyWithValue("default_price", BeNil()))))
		Expect(shorts["data"]).NotTo(ContainElement(HaveKeyWithValue("id", adjustable)))

		// Eventually: the REST apiserver's cache may not have seen the adjustable template yet
		// (the wait above was for the short one).
		var templates []any
		Eventually(func() []any {
			templates = api.get("/v1/templates?capability=video.template", a.key).JSON()["data"].([]any)
			return templates
		}).Should(ContainElement(And(HaveKeyWithValue("id", adjustable), HaveKeyWithValue("duration_adjustable", true),
			HaveKeyWithValue("min_duration", BeNumerically("==", 5)), HaveKeyWithValue("max_duration", BeNumerically("==", 20)),
			HaveKeyWithValue("duration_prices", map[string]any{"5": float64(10), "20": float64(30)}))))
		Expect(templates).NotTo(ContainElement(HaveKeyWithValue("id", ownID)))

		other := newAccount(0)
		Expect(api.get("/v1/templates?capability=video.short", other.key).JSON()["data"]).NotTo(ContainElement(HaveKeyWithValue("id", ownID)))

		bad := api.get("/v1/templates?capability=video.long", a.key)
		Expect(bad.Status).To(Equal(http.StatusBadRequest))
		Expect(bad.Message()).To(ContainSubstring("unknown capability"))
	})

	It("says what every selectable duration of an adjustable template costs, as a task on it is charged", func() {
		a := newAccount(100)
		adjustable := template(videogenv1alpha1.CapabilityTemplate, nil, func(s *videogenv1alpha1.TemplateSpec) {
			s.DurationAdjustable, s.MinDuration, s.MaxDuration = true, ptr.To[int32](5), ptr.To[int32](20)
			s.DurationPrices = map[string]int64{"5": 12, "20": 30}
		})
		fixed := template(videogenv1alpha1.CapabilityTemplate, ptr.To[int64](7), nil)

		var listed []any
		Eventually(func() []any {
			listed = api.get("/v1/templates?capability=video.template", a.key).JSON()["data"].([]any)
			return listed
		}).Should(ContainElements(HaveKeyWithValue("id", adjustable), HaveKeyWithValue("id", fixed)))
		Expect(listed).To(ContainElement(And(HaveKeyWithValue("id", fixed), HaveKeyWithValue("default_price", BeNil()))))
		var view map[string]any
		for _, t := range listed {
			if t.(map[string]any)["id"] == adjustable {
				view = t.(map[string]any)
			}
		}
		Expect(view).To(HaveKeyWithValue("default_price", BeNumerically("==", 10)))
		priceOf := func(d int) any {
			if p, ok := view["duration_prices"].(map[string]any)[strconv.Itoa(d)]; ok {
				return p
			}
			return view["default_price"]
		}
		for _, d := range []int{5, 7, 20} {
			task := api.post("/v1/videos/template", a.key, map[string]any{"template_id": adjustable, "duration": d})
			Expect(task.Status).To(Equal(http.StatusAccepted), string(task.Body))
			Expect(task.JSON()["cost"]).To(Equal(priceOf(d)), "duration %d", d)
		}
		// As Python's json.dumps writes a float duration: an integer to the OpenAPI schema.
		task := api.post("/v1/videos/template", a.key, `{"template_id": "`+adjustable+`", "duration": 7.0}`)
		Expect(task.Status).To(Equal(http.StatusAccepted), string(task.Body))
		Expect(task.JSON()["cost"]).To(Equal(priceOf(7)))
		stored := &videogenv1alpha1.VideoTask{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: a.ns, Name: task.JSON()["id"].(string)}, stored)).To(Succeed())
		Expect(stored.Spec.Duration).To(HaveValue(BeEquivalentTo(7)))
	})

	It("says what a task without a template costs, as an eraser task is charged", func() {
		a := newAccount(100)
		listing := api.get("/v1/templates?capability=video.eraser", a.key).JSON()
		task := api.post("/v1/videos/eraser", a.key, map[string]any{"video": "https://cdn.example.com/v.mp4"})
		Expect(task.Status).To(Equal(http.StatusAccepted), string(task.Body))
		Expect(listing).To(HaveKeyWithValue("default_price", task.JSON()["cost"]))
	})

	It("creates a short template once per Idempotency-Key", func() {
		a := newAccount(100)
		body := map[string]any{"name": "Intro", "target_url": "https://cdn.example.com/intro.mp4"}
		first := api.post("/v1/short-templates", a.key, body, "Idempotency-Key", "tmpl-1")
		Expect(first.Status).To(Equal(http.StatusCreated), string(first.Body))
		id := first.JSON()["id"].(string)

		// A retry (the answer was lost): the same template, marked as a replay.
		Eventually(func() int { return api.post("/v1/short-templates", a.key, body, "Idempotency-Key", "tmpl-1").Status }).
			Should(Equal(http.StatusOK))
		again := api.post("/v1/short-templates", a.key, body, "Idempotency-Key", "tmpl-1")
		Expect(again.Header.Get("Idempotent-Replayed")).To(Equal("true"))
		Expect(again.JSON()).To(HaveKeyWithValue("id", id))
		other := api.post("/v1/short-templates", a.key, map[string]any{"name": "Other", "target_url": "https://cdn.example.com/o.mp4"},
			"Idempotency-Key", "tmpl-1")
		Expect(other.Status).To(Equal(http.StatusUnprocessableEntity))
		Expect(other.ErrorCode()).To(Equal("idempotency_key_reused"))
		// One template stored, and so listed. The listing reads the replica's cache, which may
		// not have the template yet (a watch behind on a loaded machine): awaited, then it must
		// stay as it is.
		var stored videogenv1alpha1.ShortTemplateList
		Expect(k8sClient.List(ctx, &stored, client.InNamespace(a.ns))).To(Succeed())
		Expect(stored.Items).To(ConsistOf(HaveField("Labels", HaveKeyWithValue(videogenv1alpha1.LabelShortTemplateID, id))))
		list := func() []any { return api.get("/v1/short-templates", a.key).JSON()["data"].([]any) }
		Eventually(list).Should(ConsistOf(HaveKeyWithValue("id", id)))
		Consistently(list, "500ms").Should(ConsistOf(HaveKeyWithValue("id", id)))

		// A key whose template is being deleted (its create meets the old object, which is gone
		// when read back) is 409 with Retry-After, never a 500.
		gone := startAPIServer(rate.Inf, 1, nil, func(c client.Client) client.Client {
			return interceptor.NewClient(noWatch{c}, interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if _, ok := obj.(*videogenv1alpha1.ShortTemplate); ok {
						return apierrors.NewAlreadyExists(schema.GroupResource{Group: "videogen.dev", Resource: "shorttemplates"}, obj.GetName())
					}
					return c.Create(ctx, obj, opts...)
				},
			})
		})
		deleting := gone.post("/v1/short-templates", a.key, body, "Idempotency-Key", "tmpl-being-deleted")
		Expect(deleting.Status).To(Equal(http.StatusConflict), string(deleting.Body))
		Expect(deleting.ErrorCode()).To(Equal("idempotency_key_in_use"))
		Expect(deleting.Header.Get("Retry-After")).To(Equal("1"))

		// The same key in another account is another template.
		b := newAccount(100)
		elsewhere := api.post("/v1/short-templates", b.key, body, "Idempotency-Key", "tmpl-1")
		Expect(elsewhere.Status).To(Equal(http.StatusCreated), string(elsewhere.Body))
		Expect(elsewhere.JSON()["id"]).NotTo(Equal(id))
	})

	It("creates, lists, patches, uses and deletes an account's own short templates", func() {
		a := newAccount(100)
		created := api.post("/v1/short-templates", a.key, map[string]any{"name": "Intro", "target_url": "https://cdn.example.com/intro.mp4", "duration": 8})
		Expect(created.Status).To(Equal(http.StatusCreated))
		id := created.JSON()["id"].(string)
		Expect(id).To(HavePrefix("ushort_"))

		patched := api.do(call{method: "PATCH", path: "/v1/short-templates/" + id, key: a.key,
			body: map[string]any{"name": "Intro v2", "cover_url": "https://cdn.example.com/intro.jpg"}})
		Expect(patched.Status).To(Equal(http.StatusOK), string(patched.Body))
		Expect(patched.JSON()).To(And(HaveKeyWithValue("id", id), HaveKeyWithValue("name", "Intro v2"),
			HaveKeyWithValue("duration", BeNumerically("==", 8)), HaveKeyWithValue("cover_url", "https://cdn.example.com/intro.jpg")))
		// The listing and the template itself show its duration.
		Eventually(func() []any { return api.get("/v1/short-templates", a.key).JSON()["data"].([]any) }).
			Should(ConsistOf(And(HaveKeyWithValue("name", "Intro v2"), HaveKeyWithValue("duration", BeNumerically("==", 8)))))
		one := api.get("/v1/short-templates/"+id, a.key)
		Expect(one.Status).To(Equal(http.StatusOK), string(one.Body))
		Expect(one.JSON()).To(And(HaveKeyWithValue("id", id), HaveKeyWithValue("name", "Intro v2"), HaveKeyWithValue("object", "short_template"),
			HaveKeyWithValue("duration", BeNumerically("==", 8))))

		// Usable as template_id right away, at the default price.
		task := api.post("/v1/videos/short", a.key, map[string]any{"template_id": id, "face": "https://cdn.example.com/f.jpg"})
		Expect(task.Status).To(Equal(http.StatusAccepted), string(task.Body))
		Expect(task.JSON()).To(HaveKeyWithValue("cost", BeNumerically("==", 10)))

		Expect(api.do(call{method: "DELETE", path: "/v1/short-templates/" + id, key: a.key}).Status).To(Equal(http.StatusNoContent))
		// At once, while the cache may still hold it: 404, as later.
		again := api.do(call{method: "DELETE", path: "/v1/short-templates/" + id, key: a.key})
		Expect(again.Status).To(Equal(http.StatusNotFound), string(again.Body))
		Expect(again.ErrorCode()).To(Equal("not_found"))
	})

	It("patches a short template's target_url and duration, keeping the other fields", func() {
		a := newAccount(0)
		created := api.post("/v1/short-templates", a.key, map[string]any{"name": "Outro",
			"target_url": "https://cdn.example.com/outro.mp4", "cover_url": "https://cdn.example.com/outro.jpg", "duration": 8})
		Expect(created.Status).To(Equal(http.StatusCreated), string(created.Body))
		id := created.JSON()["id"].(string)

		patched := api.do(call{method: "PATCH", path: "/v1/short-templates/" + id, key: a.key,
			body: map[string]any{"target_url": "https://cdn.example.com/outro-v2.mp4", "duration": 12}})
		Expect(patched.Status).To(Equal(http.StatusOK), string(patched.Body))
		Expect(patched.JSON()).To(And(HaveKeyWithValue("id", id), HaveKeyWithValue("name", "Outro"),
			HaveKeyWithValue("target_url", "https://cdn.example.com/outro-v2.mp4"), HaveKeyWithValue("duration", BeNumerically("==", 12)),
			HaveKeyWithValue("cover_url", "https://cdn.example.com/outro.jpg")))
		want := videogenv1alpha1.ShortTemplateSpec{DisplayName: "Outro", TargetURL: "https://cdn.example.com/outro-v2.mp4",
			CoverURL: "https://cdn.example.com/outro.jpg", Duration: ptr.To[int32](12)}
		Expect(shortTemplateSpec(a.ns, id)).To(Equal(want))

		// A refused patch changes nothing.
		for _, body := range []map[string]any{{"target_url": "http://10.0.0.5/x.mp4"}, {"duration": 0}, {"name": nil}, {"target_url": nil}} {
			bad := api.do(call{method: "PATCH", path: "/v1/short-templates/" + id, key: a.key, body: body})
			Expect(bad.Status).To(Equal(http.StatusBadRequest), "%v", body)
			Expect(bad.ErrorCode()).To(Equal("invalid_request"))
		}
		Expect(shortTemplateSpec(a.ns, id)).To(Equal(want))

		// null clears an optional field; absence keeps it.
		cleared := api.do(call{method: "PATCH", path: "/v1/short-templates/" + id, key: a.key, body: map[string]any{"cover_url": nil}})
		Expect(cleared.Status).To(Equal(http.StatusOK), string(cleared.Body))
		Expect(cleared.JSON()).To(And(HaveKeyWithValue("cover_url", BeNil()), HaveKeyWithValue("duration", BeNumerically("==", 12))))
		cleared = api.do(call{method: "PATCH", path: "/v1/short-templates/" + id, key: a.key, body: map[string]any{"duration": nil}})
		Expect(cleared.Status).To(Equal(http.StatusOK), string(cleared.Body))
		want.CoverURL, want.Duration = "", nil
		Expect(shortTemplateSpec(a.ns, id)).To(Equal(want))
	})

	It("refuses bad short template input with the field named", func() {
		a := newAccount(0)
		cases := []struct {
			body    any
			message string
		}{
			{map[string]any{"target_url": "https://cdn.example.com/x.mp4"}, `"name" is required`},
			{map[string]any{"name": "  ", "target_url": "https://cdn.example.com/x.mp4"}, `"name" must not be empty`},
			{map[string]any{"name": "x", "target_url": "http://10.0.0.5/x.mp4"}, `"target_url"`},
			{map[string]any{"name": "x", "target_url": "https://cdn.example.com/x.mp4", "duration": 0}, `"duration" must be from 1 to 3600`},
			{map[string]any{"name": "x", "target_url": "https://cdn.example.com/x.mp4", "colour": "red"}, `unknown field "colour"`},
			{map[string]any{"name": 5, "target_url": "https://cdn.example.com/x.mp4"}, `field "name" must be a string`},
		}
		for _, c := range cases {
			resp := api.post("/v1/short-templates", a.key, c.body)
			Expect(resp.Status).To(Equal(http.StatusBadRequest), "%v", c.body)
			Expect(resp.ErrorCode()).To(Equal("invalid_request"))
			Expect(resp.Message()).To(ContainSubstring(c.message))
		}
		Expect(api.get("/v1/short-templates", a.key).JSON()["data"]).To(BeEmpty())
	})
})

// The REST API's template ids are official Template names and ushort_ ids; a ShortTemplate's
// object name (ushort-…, as kubectl lists it) is for tasks made with kubectl only.
var _ = Describe("A short template's object name as template_id", func() {
	It("is answered as an unknown template, on every endpoint, moving nothing", func() {
		a := newAccount(100)
		created := api.post("/v1/short-templates", a.key, map[string]any{"name": "Mine", "target_url": "https://cdn.example.com/mine.mp4"})
		Expect(created.Status).To(Equal(http.StatusCreated), string(created.Body))
		id := created.JSON()["id"].(string)
		var l videogenv1alpha1.ShortTemplateList
		Expect(k8sClient.List(ctx, &l, client.InNamespace(a.ns), client.MatchingLabels{videogenv1alpha1.LabelShortTemplateID: id})).To(Succeed())
		Expect(l.Items).To(HaveLen(1))
		objectName := l.Items[0].Name
		Expect(objectName).To(HavePrefix("ushort-"))

		unknown := api.post("/v1/videos/short", a.key, map[string]any{"template_id": "no-such-template", "face": "https://cdn.example.com/f.jpg"})
		Expect(unknown.Status).To(Equal(http.StatusBadRequest), string(unknown.Body))
		for _, path := range []string{"/v1/videos/short", "/v1/images/pose"} {
			resp := api.post(path, a.key, map[string]any{"template_id": objectName, "face": "https://cdn.example.com/f.jpg"})
			Expect(resp.Status).To(Equal(unknown.Status), "%s: %s", path, resp.Body)
			Expect(resp.ErrorCode()).To(Equal(unknown.ErrorCode()))
			Expect(resp.Message()).To(ContainSubstring("no template %q is available to this account", objectName))
		}
		Expect(tasksIn(a.ns)).To(BeEmpty())
		suite.ExpectBalanced(a.ns, 100, 0, 0)

		// Its id is the way.
		byID := api.post("/v1/videos/short", a.key, map[string]any{"template_id": id, "face": "https://cdn.example.com/f.jpg"})
		Expect(byID.Status).To(Equal(http.StatusAccepted), string(byID.Body))
	})

	// A REST task is run on what it was quoted on: when its official Template goes, a
	// ShortTemplate of the account that bears the same object name does not stand in for it.
	It("does not stand in for a REST task's official template that was deleted", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil)
		backend.Stall(tmpl)
		namesake := &videogenv1alpha1.ShortTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: tmpl},
			Spec: videogenv1alpha1.ShortTemplateSpec{DisplayName: "Namesake", TargetURL: "https://cdn.example.com/namesake.mp4"}}
		Expect(k8sClient.Create(ctx, namesake)).To(Succeed())

		resp := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"})
		Expect(resp.Status).To(Equal(http.StatusAccepted), string(resp.Body))
		Expect(resp.JSON()["cost"]).To(BeNumerically("==", 30))
		id := resp.JSON()["id"].(string)
		waitTask(a, id, "queued")

		Expect(k8sClient.Delete(ctx, &videogenv1alpha1.Template{ObjectMeta: objectMeta(tmpl)})).To(Succeed())
		done := waitTask(a, id, "failed")
		Expect(done["error"]).To(HaveKeyWithValue("code", "template_unavailable"))
		suite.ExpectBalanced(a.ns, 100, 0, 0)
	})
})

// A rule of the ShortTemplate CRD that the REST checks missed: the kube-apiserver's Invalid
// names spec fields and quotes the value, so the client gets a 400 in request field names.
var _ = Describe("A short template the cluster refuses", func() {
	// breaking makes the replica store a target the CRD refuses, whatever the request said.
	breaking := func() *apiClient {
		bad := "ftp://" + strings.Repeat("x", 300)
		breakSpec := func(obj client.Object) {
			if st, ok := obj.(*videogenv1alpha1.ShortTemplate); ok {
				st.Spec.TargetURL = bad
			}
		}
		return startAPIServer(rate.Inf, 1, nil, func(c client.Client) client.Client {
			return interceptor.NewClient(noWatch{c}, interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					breakSpec(obj)
					return c.Create(ctx, obj, opts...)
				},
				Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					breakSpec(obj)
					return c.Update(ctx, obj, opts...)
				},
			})
		})
	}
	expectRESTWorded := func(resp response) {
		GinkgoHelper()
		Expect(resp.Status).To(Equal(http.StatusBadRequest), string(resp.Body))
		Expect(resp.ErrorCode()).To(Equal("invalid_request"))
		Expect(resp.Message()).To(ContainSubstring(`field "target_url" was refused`))
		Expect(resp.Message()).NotTo(Or(ContainSubstring("spec."), ContainSubstring("targetURL"), ContainSubstring("ftp://")))
	}

	It("answers a create with a 400 naming the request's field, and stores nothing", func() {
		a := newAccount(0)
		resp := breaking().post("/v1/short-templates", a.key, map[string]any{"name": "n", "target_url": "https://cdn.example.com/t.mp4"})
		expectRESTWorded(resp)
		Expect(api.get("/v1/short-templates", a.key).JSON()["data"]).To(BeEmpty())
	})

	It("answers a patch with a 400 naming the request's field, and changes nothing", func() {
		a := newAccount(0)
		created := api.post("/v1/short-templates", a.key, map[string]any{"name": "n", "target_url": "https://cdn.example.com/t.mp4"})
		Expect(created.Status).To(Equal(http.StatusCreated), string(created.Body))
		id := created.JSON()["id"].(string)
		before := shortTemplateSpec(a.ns, id)
		resp := breaking().do(call{method: "PATCH", path: "/v1/short-templates/" + id, key: a.key, body: map[string]any{"name": "renamed"}})
		expectRESTWorded(resp)
		Expect(shortTemplateSpec(a.ns, id)).To(Equal(before))
	})
})

var _ = Describe("Owner isolation", func() {
	It("hides one account's tasks and templates from another (404, never 403)", func() {
		owner, intruder := newAccount(100), newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](10), nil)
		task := api.post("/v1/videos/short", owner.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"})
		taskID := task.JSON()["id"].(string)
		st := api.post("/v1/short-templates", owner.key, map[string]any{"name": "Private", "target_url": "https://cdn.example.com/p.mp4"})
		stID := st.JSON()["id"].(string)
		// The owner sees its template first, so the intruder's answers below are not a cache lag.
		Eventually(func() []any { return api.get("/v1/short-templates", owner.key).JSON()["data"].([]any) }).
			Should(ContainElement(HaveKeyWithValue("id", stID)))

		Expect(api.get("/v1/short-templates", intruder.key).JSON()["data"]).NotTo(ContainElement(HaveKeyWithValue("id", stID)))
		for _, c := range []call{
			{method: "GET", path: "/v1/tasks/" + taskID},
			{method: "POST", path: "/v1/tasks/" + taskID + "/cancel"},
			{method: "GET", path: "/v1/short-templates/" + stID},
			{method: "PATCH", path: "/v1/short-templates/" + stID, body: map[string]any{"name": "mine now"}},
			{method: "DELETE", path: "/v1/short-templates/" + stID},
		} {
			c.key = intruder.key
			resp := api.do(c)
			Expect(resp.Status).To(Equal(http.StatusNotFound), "%s %s", c.method, c.path)
			Expect(resp.ErrorCode()).To(Equal("not_found"))
		}
		Expect(idsOf(api.get("/v1/tasks", intruder.key).JSON())).To(BeEmpty())
		use := api.post("/v1/videos/short", intruder.key, map[string]any{"template_id": stID, "face": "https://cdn.example.com/f.jpg"})
		Expect(use.Status).To(Equal(http.StatusBadRequest))
		Expect(use.Message()).To(ContainSubstring("no template"))
		suite.ExpectBalanced(intruder.ns, 100, 0, 0)
		// And the owner still sees both, unchanged.
		Expect(api.get("/v1/tasks/"+taskID, owner.key).Status).To(Equal(http.StatusOK))
		Expect(api.get("/v1/short-templates", owner.key).JSON()["data"]).To(ContainElement(And(HaveKeyWithValue("id", stID), HaveKeyWithValue("name", "Private"))))
	})
})

var _ = Describe("Webhook signing secret", func() {
	It("is created on first read, stable, and rotated with an overlap", func() {
		a := newAccount(0)
		first := api.get("/v1/webhook-secret", a.key)
		Expect(first.Status).To(Equal(http.StatusOK))
		secret := first.JSON()["secret"].(string)
		Expect(secret).To(HavePrefix("whsec_"))
		Expect(first.JSON()["previous_secret"]).To(BeNil())
		Expect(api.get("/v1/webhook-secret", a.key).JSON()["secret"]).To(Equal(secret))

		rotated := api.post("/v1/webhook-secret/rotate", a.key, nil)
		Expect(rotated.Status).To(Equal(http.StatusOK))
		Expect(rotated.JSON()["secret"]).NotTo(Equal(secret))
		Expect(rotated.JSON()["previous_secret"]).To(Equal(secret))
		Expect(rotated.JSON()["previous_expires_at"]).NotTo(BeNil())

		other := newAccount(0)
		Expect(api.get("/v1/webhook-secret", other.key).JSON()["secret"]).NotTo(Equal(rotated.JSON()["secret"]))
	})
})

// shortTemplateSpec reads the spec of the account's ShortTemplate with public id id.
func shortTemplateSpec(ns, id string) videogenv1alpha1.ShortTemplateSpec {
	GinkgoHelper()
	var l videogenv1alpha1.ShortTemplateList
	Expect(k8sClient.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{videogenv1alpha1.LabelShortTemplateID: id})).To(Succeed())
	Expect(l.Items).To(HaveLen(1))
	return l.Items[0].Spec
}

var _ = Describe("A short template write that landed but answered an error", func() {
	// timingOut is a replica whose writes of short templates answer the kube-apiserver's 504
	// (etcd slow), after landing when land is set, or without.
	timingOut := func(land *atomic.Bool) *apiClient {
		return startAPIServer(rate.Inf, 1, nil, landsThenTimesOut(land, func(obj client.Object) bool {
			_, ok := obj.(*videogenv1alpha1.ShortTemplate)
			return ok
		}))
	}
	stored := func(ns string) []videogenv1alpha1.ShortTemplate {
		GinkgoHelper()
		var l videogenv1alpha1.ShortTemplateList
		Expect(k8sClient.List(ctx, &l, client.InNamespace(ns))).To(Succeed())
		return l.Items
	}
	body := map[string]any{"name": "Intro", "target_url": "https://cdn.example.com/intro.mp4"}

	It("answers 201 with the template a create without Idempotency-Key made, and 503 to one that did not land", func() {
		a := newAccount(0)
		var land atomic.Bool
		replica := timingOut(&land)
		lost := replica.post("/v1/short-templates", a.key, body)
		expectClusterUnavailable(lost) // the kube-apiserver's 504: retry, not the server's fault
		Expect(stored(a.ns)).To(BeEmpty())

		// Its name is random and known only to the request: an error would make the client's
		// retry a second template.
		land.Store(true)
		landed := replica.post("/v1/short-templates", a.key, body)
		Expect(landed.Status).To(Equal(http.StatusCreated), string(landed.Body))
		Expect(landed.JSON()).To(And(HaveKeyWithValue("id", HavePrefix("ushort_")), HaveKeyWithValue("name", "Intro"),
			HaveKeyWithValue("object", "short_template")))
		Expect(keysOf(landed.JSON())).To(Equal(keysOf(api.post("/v1/short-templates", newAccount(0).key, body).JSON())))
		items := stored(a.ns)
		Expect(items).To(HaveLen(1))
		Expect(items[0].Labels).To(HaveKeyWithValue(videogenv1alpha1.LabelShortTemplateID, landed.JSON()["id"]))
	})

	It("replays a keyed create whose template landed but answered an error", func() {
		a := newAccount(0)
		var land atomic.Bool
		land.Store(true)
		replica := timingOut(&land)
		first := replica.post("/v1/short-templates", a.key, body, "Idempotency-Key", "landed-1")
		// The client's retry, through this replica or another, meets the template and replays it.
		for _, r := range []*apiClient{replica, api} {
			again := r.post("/v1/short-templates", a.key, body, "Idempotency-Key", "landed-1")
			Expect(again.Status).To(Equal(http.StatusOK), string(again.Body))
			Expect(again.Header.Get("Idempotent-Replayed")).To(Equal("true"))
			Expect(again.JSON()).To(HaveKeyWithValue("name", "Intro"))
		}
		Expect(stored(a.ns)).To(HaveLen(1))
		// The request whose create landed answers as the create would have.
		Expect(first.Status).To(Equal(http.StatusCreated), string(first.Body))
		Expect(first.JSON()["id"]).To(Equal(api.post("/v1/short-templates", a.key, body, "Idempotency-Key", "landed-1").JSON()["id"]))
	})

	It("answers 200 to a PATCH that landed but answered an error, and 503 to one that did not land", func() {
		a := newAccount(0)
		created := api.post("/v1/short-templates", a.key, body)
		Expect(created.Status).To(Equal(http.StatusCreated), string(created.Body))
		id := created.JSON()["id"].(string)
		var land atomic.Bool
		replica := timingOut(&land)
		Eventually(func() int { return replica.get("/v1/short-templates/"+id, a.key).Status }).Should(Equal(http.StatusOK))
		rename := call{method: "PATCH", path: "/v1/short-templates/" + id, key: a.key, body: map[string]any{"name": "Outro"}}

		lost := replica.do(rename)
		expectClusterUnavailable(lost) // the kube-apiserver's 504: retry, not the server's fault
		Expect(stored(a.ns)[0].Spec.DisplayName).To(Equal("Intro"))

		land.Store(true)
		landed := replica.do(rename)
		Expect(landed.Status).To(Equal(http.StatusOK), string(landed.Body))
		Expect(landed.JSON()).To(And(HaveKeyWithValue("id", id), HaveKeyWithValue("name", "Outro")))
		Expect(stored(a.ns)[0].Spec.DisplayName).To(Equal("Outro"))
	})

	It("answers 204 to a delete that landed but answered an error, and 503 to one that did not land", func() {
		a := newAccount(0)
		created := api.post("/v1/short-templates", a.key, body)
		Expect(created.Status).To(Equal(http.StatusCreated), string(created.Body))
		id := created.JSON()["id"].(string)
		var land atomic.Bool
		replica := timingOut(&land)
		Eventually(func() int { return replica.get("/v1/short-templates/"+id, a.key).Status }).Should(Equal(http.StatusOK))

		lost := replica.do(call{method: "DELETE", path: "/v1/short-templates/" + id, key: a.key})
		expectClusterUnavailable(lost) // the kube-apiserver's 504: retry, not the server's fault
		Expect(stored(a.ns)).To(HaveLen(1))

		// An error here would make the client's retry a 404 for the delete it asked for.
		land.Store(true)
		landed := replica.do(call{method: "DELETE", path: "/v1/short-templates/" + id, key: a.key})
		Expect(landed.Status).To(Equal(http.StatusNoContent), string(landed.Body))
		Eventually(func() []videogenv1alpha1.ShortTemplate { return stored(a.ns) }).Should(BeEmpty())
	})
})

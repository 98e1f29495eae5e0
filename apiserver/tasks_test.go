package apiserver_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/time/rate"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

func facePNG() string {
	var buf bytes.Buffer
	Expect(png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 32, 32)))).To(Succeed())
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

var _ = Describe("Generation endpoints", func() {
	It("creates a short video from a face URL, runs it and deducts its price", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil)
		resp := api.post("/v1/videos/short", a.key, map[string]any{
			"template_id": tmpl, "face": "https://cdn.example.com/face.jpg", "webhook_url": "https://hooks.example.com/done"})
		Expect(resp.Status).To(Equal(http.StatusAccepted), string(resp.Body))
		task := resp.JSON()
		Expect(task).To(HaveKeyWithValue("object", "task"))
		Expect(task).To(HaveKeyWithValue("capability", "video.short"))
		Expect(task).To(HaveKeyWithValue("status", "queued"))
		Expect(task).To(HaveKeyWithValue("cost", BeNumerically("==", 30)))
		Expect(task).To(HaveKeyWithValue("template_id", tmpl))
		Expect(task).To(HaveKeyWithValue("webhook_url", "https://hooks.example.com/done"))
		Expect(task["id"]).To(HavePrefix("vt-"))
		expectCharged(a.ns, 70, 30) // frozen before the 202
		Expect(tasksIn(a.ns)[0].Annotations).NotTo(HaveKey(videogenv1alpha1.AnnotationFaceImageUploaded), "the caller's own URL")

		done := waitTask(a, task["id"].(string), "succeeded")
		Expect(done["result"]).To(HaveKeyWithValue("video_url", testbackend.ResultURL(task["id"].(string))))
		Expect(done["progress"]).To(BeNumerically("==", 100))
		Expect(done["completed_at"]).NotTo(BeNil())
		Expect(done["phases"]).To(HaveLen(2))
		suite.ExpectBalanced(a.ns, 70, 0, 30)
		// /v1/balance reads the apiserver's cache, which may be a moment behind.
		Eventually(func() map[string]any { return api.get("/v1/balance", a.key).JSON() }).Should(And(
			HaveKeyWithValue("balance", BeNumerically("==", 70)), HaveKeyWithValue("spent", BeNumerically("==", 30)),
			HaveKeyWithValue("frozen", BeNumerically("==", 0)), HaveKeyWithValue("credited", BeNumerically("==", 100))))
	})

	DescribeTable("accepts a base64 face, stores it and hands the task a URL instead",
		func(prefix string) {
			a := newAccount(50)
			tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](5), nil)
			resp := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": prefix + facePNG()})
			Expect(resp.Status).To(Equal(http.StatusAccepted), string(resp.Body))
			tasks := tasksIn(a.ns)
			Expect(tasks).To(HaveLen(1))
			url := tasks[0].Spec.Inputs.FaceImageURL
			Expect(url).To(HavePrefix(api.base + "/v1/blobs/"))
			Expect(tasks[0].Annotations).To(HaveKeyWithValue(videogenv1alpha1.AnnotationFaceImageUploaded, "true"),
				"a failure to read it back must not name that URL, which the caller never saw")
			got, err := http.Get(url)
			Expect(err).NotTo(HaveOccurred())
			defer got.Body.Close()
			raw, _ := io.ReadAll(got.Body)
			_, format, err := image.DecodeConfig(bytes.NewReader(raw))
			Expect(err).NotTo(HaveOccurred())
			Expect(format).To(Equal("png"))
		},
		Entry("plain base64", ""),
		Entry("with a data: prefix", "data:image/png;base64,"),
	)

	It("refuses a base64 face that is not an image, and moves nothing", func() {
		a := newAccount(50)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](5), nil)
		resp := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl,
			"face": base64.StdEncoding.EncodeToString([]byte("definitely not an image"))})
		Expect(resp.Status).To(Equal(http.StatusBadRequest))
		Expect(resp.ErrorCode()).To(Equal("invalid_request"))
		Expect(resp.Message()).To(ContainSubstring(`"face"`))
		Expect(tasksIn(a.ns)).To(BeEmpty())
		suite.ExpectBalanced(a.ns, 50, 0, 0)
	})

	It("tells a face or video URL written without http:// or https:// to add it, not that it is bad base64", func() {
		a := newAccount(50)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](5), nil)
		for _, face := range []string{"cdn.example.com/me.jpg", "https:/cdn.example.com/me.jpg", "me.jpg"} {
			resp := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": face})
			Expect(resp.Status).To(Equal(http.StatusBadRequest), face)
			Expect(resp.Message()).To(ContainSubstring("http:// or https://"), face)
		}
		for _, video := range []string{"cdn.example.com/clip.mp4", "https:/cdn.example.com/clip.mp4"} {
			resp := api.post("/v1/videos/eraser", a.key, map[string]any{"video": video})
			Expect(resp.Status).To(Equal(http.StatusBadRequest), video)
			Expect(resp.Message()).To(ContainSubstring("http:// or https://"), video)
		}
		// A base64 face that is no image keeps its message, with no hint about URLs.
		resp := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl,
			"face": "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("definitely not an image"))})
		Expect(resp.Status).To(Equal(http.StatusBadRequest))
		Expect(resp.Message()).NotTo(ContainSubstring("http://"))
		Expect(tasksIn(a.ns)).To(BeEmpty())
		suite.ExpectBalanced(a.ns, 50, 0, 0)
	})

	It("cleans a public video with the eraser and refuses base64 video", func() {
		a := newAccount(50)
		bad := api.post("/v1/videos/eraser", a.key, map[string]any{"video": base64.StdEncoding.EncodeToString([]byte("mp4"))})
		Expect(bad.Status).To(Equal(http.StatusBadRequest))
		Expect(bad.Message()).To(ContainSubstring("base64 video is not accepted"))

		resp := api.post("/v1/videos/eraser", a.key, map[string]any{"video": "https://cdn.example.com/clip.mp4"})
		Expect(resp.Status).To(Equal(http.StatusAccepted), string(resp.Body))
		Expect(resp.JSON()).To(HaveKeyWithValue("cost", BeNumerically("==", 10)), "the eraser costs the default price")
		waitTask(a, resp.JSON()["id"].(string), "succeeded")
		suite.ExpectBalanced(a.ns, 40, 0, 10)
	})

	It("prices adjustable templates by duration and refuses a duration out of range", func() {
		a := newAccount(200)
		tmpl := template(videogenv1alpha1.CapabilityTemplate, nil, func(s *videogenv1alpha1.TemplateSpec) {
			s.DurationAdjustable, s.MinDuration, s.MaxDuration = true, ptr.To[int32](5), ptr.To[int32](30)
			s.DurationPrices = map[string]int64{"10": 45}
		})
		out := api.post("/v1/videos/template", a.key, map[string]any{"template_id": tmpl, "duration": 31})
		Expect(out.Status).To(Equal(http.StatusBadRequest))
		Expect(out.Message()).To(ContainSubstring("outside the template's range [5, 30]"))
		missing := api.post("/v1/videos/template", a.key, map[string]any{"template_id": tmpl})
		Expect(missing.Status).To(Equal(http.StatusBadRequest))
		Expect(missing.Message()).To(ContainSubstring(`"duration" is required`))

		ok := api.post("/v1/videos/template", a.key, map[string]any{"template_id": tmpl, "duration": 10})
		Expect(ok.Status).To(Equal(http.StatusAccepted), string(ok.Body))
		Expect(ok.JSON()).To(HaveKeyWithValue("cost", BeNumerically("==", 45)))
		Expect(ok.JSON()).To(HaveKeyWithValue("duration", BeNumerically("==", 10)))
		expectCharged(a.ns, 155, 45)
	})

	It("ignores a duration on a fixed template and charges the flat price", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](25), nil)
		resp := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg", "duration": 999})
		Expect(resp.Status).To(Equal(http.StatusAccepted), string(resp.Body))
		Expect(resp.JSON()).To(HaveKeyWithValue("cost", BeNumerically("==", 25)))
		Expect(resp.JSON()).To(HaveKeyWithValue("duration", BeNil()))
	})

	It("renders a fixed-price video.template at the asked duration, for its flat price", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityTemplate, ptr.To[int64](30), nil)
		resp := api.post("/v1/videos/template", a.key, map[string]any{"template_id": tmpl, "duration": 12})
		Expect(resp.Status).To(Equal(http.StatusAccepted), string(resp.Body))
		Expect(resp.JSON()).To(HaveKeyWithValue("cost", BeNumerically("==", 30)))
		Expect(resp.JSON()).To(HaveKeyWithValue("duration", BeNumerically("==", 12)))
		expectCharged(a.ns, 70, 30)
	})

	It("makes a pose image and reports it as image_url", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityPose, ptr.To[int64](8), nil)
		resp := api.post("/v1/images/pose", a.key, map[string]any{"template_id": tmpl, "face": facePNG()})
		Expect(resp.Status).To(Equal(http.StatusAccepted), string(resp.Body))
		done := waitTask(a, resp.JSON()["id"].(string), "succeeded")
		Expect(done["result"]).To(HaveKey("image_url"))
		Expect(done["result"]).NotTo(HaveKey("video_url"))
	})

	It("refuses a template of another capability", func() {
		a := newAccount(100)
		eraserTmpl := template(videogenv1alpha1.CapabilityEraser, nil, nil)
		resp := api.post("/v1/videos/short", a.key, map[string]any{"template_id": eraserTmpl, "face": "https://cdn.example.com/f.jpg"})
		Expect(resp.Status).To(Equal(http.StatusBadRequest))
		Expect(resp.Message()).To(ContainSubstring("is for video.eraser, not video.short"))
	})

	It("cancels a running task and refunds its points", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](40), nil)
		backend.ScriptTemplate(tmpl, testbackend.Script{Analyze: testbackend.Hang})
		resp := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"},
			"Idempotency-Key", "cancel-me")
		id := resp.JSON()["id"].(string)
		waitTask(a, id, "running")
		suite.ExpectBalanced(a.ns, 60, 40, 0)

		c := api.post("/v1/tasks/"+id+"/cancel", a.key, nil)
		Expect(c.Status).To(Equal(http.StatusAccepted), string(c.Body))
		done := waitTask(a, id, "canceled")
		Expect(done["error"]).To(HaveKeyWithValue("code", "canceled"))
		suite.ExpectBalanced(a.ns, 100, 0, 0)

		again := api.post("/v1/tasks/"+id+"/cancel", a.key, nil)
		Expect(again.Status).To(Equal(http.StatusOK), "a cancel of a canceled task is done already: "+string(again.Body))
		Expect(again.JSON()).To(HaveKeyWithValue("status", "canceled"))
		suite.ExpectBalanced(a.ns, 100, 0, 0)
	})

	It("answers a repeated cancel with 202 while the cancel is under way, and 200 once the task is canceled", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](40), nil)
		backend.ScriptTemplate(tmpl, testbackend.Script{Analyze: testbackend.Hang})
		id := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"}).JSON()["id"].(string)
		waitTask(a, id, "running")
		release := backend.HoldCancel(id) // the backend takes its time to stop the work

		first := api.post("/v1/tasks/"+id+"/cancel", a.key, nil)
		Expect(first.Status).To(Equal(http.StatusAccepted), string(first.Body))
		Expect(first.JSON()).To(And(HaveKeyWithValue("id", id), HaveKeyWithValue("status", "running")))
		second := api.post("/v1/tasks/"+id+"/cancel", a.key, nil)
		Expect(second.Status).To(Equal(http.StatusAccepted), "a retried cancel while the first is under way: "+string(second.Body))
		Expect(keysOf(second.JSON())).To(Equal(keysOf(first.JSON())), "the same answer as the first")
		Expect(second.JSON()).To(HaveKeyWithValue("status", "running"))
		Consistently(func() any { return api.get("/v1/tasks/"+id, a.key).JSON()["status"] }, 500*time.Millisecond).
			Should(Equal("running"), "not canceled until its work stopped")

		release()
		waitTask(a, id, "canceled")
		third := api.post("/v1/tasks/"+id+"/cancel", a.key, nil)
		Expect(third.Status).To(Equal(http.StatusOK), "a cancel of a canceled task: "+string(third.Body))
		Expect(third.JSON()).To(And(HaveKeyWithValue("id", id), HaveKeyWithValue("status", "canceled")))
		Expect(keysOf(third.JSON())).To(Equal(keysOf(first.JSON())))
		suite.ExpectBalanced(a.ns, 100, 0, 0)
	})

	It("answers 202 to a cancel whose patch landed but answered an error, and 503 to one that did not land", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](40), nil)
		backend.ScriptTemplate(tmpl, testbackend.Script{Analyze: testbackend.Hang})
		id := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"}).JSON()["id"].(string)
		waitTask(a, id, "running")
		var land atomic.Bool
		// A replica whose patches answer the kube-apiserver's 504 (etcd slow), after landing or
		// without.
		timingOut := startAPIServer(rate.Inf, 1, nil, landsThenTimesOut(&land, func(obj client.Object) bool {
			_, ok := obj.(*videogenv1alpha1.VideoTask)
			return ok
		}))
		lost := timingOut.post("/v1/tasks/"+id+"/cancel", a.key, nil)
		expectClusterUnavailable(lost) // the kube-apiserver's 504: retry, not the server's fault
		Consistently(func() any { return api.get("/v1/tasks/"+id, a.key).JSON()["status"] }, 300*time.Millisecond).Should(Equal("running"))

		land.Store(true)
		landed := timingOut.post("/v1/tasks/"+id+"/cancel", a.key, nil)
		Expect(landed.Status).To(Equal(http.StatusAccepted), string(landed.Body))
		Expect(landed.JSON()).To(HaveKeyWithValue("id", id))
		waitTask(a, id, "canceled")
		suite.ExpectBalanced(a.ns, 100, 0, 0)
	})

	// Seen in a control-plane outage (the kube-apiserver frozen 45 s, etcd 130 s): a cancel
	// waited for the kube-apiserver's own timeout, 44–94 s, and was answered 500. Its patch is
	// bounded, and a cancel the cluster did not answer is a 503 to retry.
	It("answers 503 within its bound to a cancel the kube-apiserver does not answer", func() {
		DeferCleanup(apiserver.ShortenClusterTimeouts(300 * time.Millisecond))
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](40), nil)
		backend.ScriptTemplate(tmpl, testbackend.Script{Analyze: testbackend.Hang})
		id := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"}).JSON()["id"].(string)
		waitTask(a, id, "running")
		hung := startAPIServer(rate.Inf, 1, nil, func(c client.Client) client.Client {
			return interceptor.NewClient(noWatch{c}, interceptor.Funcs{
				Patch: func(ctx context.Context, _ client.WithWatch, _ client.Object, _ client.Patch, _ ...client.PatchOption) error {
					<-ctx.Done() // etcd frozen: no answer
					return ctx.Err()
				},
			})
		})
		began := time.Now()
		resp := hung.post("/v1/tasks/"+id+"/cancel", a.key, nil)
		expectClusterUnavailable(resp)
		Expect(time.Since(began)).To(BeNumerically("<", 5*time.Second), "answered within the bound, not the kube-apiserver's timeout")
		Expect(api.get("/v1/tasks/"+id, a.key).JSON()).To(HaveKeyWithValue("status", "running"))

		again := api.post("/v1/tasks/"+id+"/cancel", a.key, nil)
		Expect(again.Status).To(Equal(http.StatusAccepted), "the retry: "+string(again.Body))
		waitTask(a, id, "canceled")
		suite.ExpectBalanced(a.ns, 100, 0, 0)
	})

	It("answers 409 to a cancel of a task that ended, even when its replica's cache shows it running", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](40), nil)
		resp := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"})
		id := resp.JSON()["id"].(string)
		waitTask(a, id, "succeeded")
		// A replica whose cache has not seen the task end yet.
		lagging := startAPIServer(rate.Inf, 1, nil, func(c client.Client) client.Client {
			return interceptor.NewClient(noWatch{c}, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if err := c.Get(ctx, key, obj, opts...); err != nil {
						return err
					}
					if t, ok := obj.(*videogenv1alpha1.VideoTask); ok {
						t.Status.Phase, t.Status.CompletedAt = videogenv1alpha1.TaskRunning, nil
					}
					return nil
				},
			})
		})
		c := lagging.post("/v1/tasks/"+id+"/cancel", a.key, nil)
		Expect(c.Status).To(Equal(http.StatusConflict), string(c.Body))
		Expect(c.Message()).To(ContainSubstring("already succeeded"))
		suite.ExpectBalanced(a.ns, 60, 0, 40)
	})

	It("cancels a queued task, not yet started, and refunds its points in full", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](40), nil)
		backend.Stall(tmpl)
		resp := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"})
		Expect(resp.Status).To(Equal(http.StatusAccepted), string(resp.Body))
		id := resp.JSON()["id"].(string)
		// Accepted (points frozen), but the backend has not started it.
		Eventually(func() map[string]any { return api.get("/v1/tasks/"+id, a.key).JSON() }).Should(And(
			HaveKeyWithValue("status", "queued"), HaveKeyWithValue("charge", "Frozen")))
		suite.ExpectBalanced(a.ns, 60, 40, 0)

		c := api.post("/v1/tasks/"+id+"/cancel", a.key, nil)
		Expect(c.Status).To(Equal(http.StatusAccepted), string(c.Body))
		done := waitTask(a, id, "canceled")
		Expect(done).To(And(HaveKeyWithValue("charge", "Refunded"), HaveKeyWithValue("started_at", BeNil())))
		Expect(done["error"]).To(HaveKeyWithValue("code", "canceled"))
		suite.ExpectBalanced(a.ns, 100, 0, 0)
	})

	It("names the phase running now: the first stage while it runs", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](10), nil)
		backend.ScriptTemplate(tmpl, testbackend.Script{Analyze: testbackend.Hang})
		resp := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"})
		Expect(resp.Status).To(Equal(http.StatusAccepted), string(resp.Body))
		Expect(resp.JSON()["phase"]).To(BeNil(), "nothing runs yet")
		id := resp.JSON()["id"].(string)

		running := waitTask(a, id, "running")
		Expect(running["phase"]).To(Equal(string(videogenv1alpha1.Stages[0])))
		Expect(running["phases"]).To(HaveExactElements(
			And(HaveKeyWithValue("name", "analyze"), HaveKeyWithValue("status", "running")),
			And(HaveKeyWithValue("name", "render"), HaveKeyWithValue("status", "pending"))))

		// Not left hanging for the rest of the suite.
		Expect(api.post("/v1/tasks/"+id+"/cancel", a.key, nil).Status).To(Equal(http.StatusAccepted))
		waitTask(a, id, "canceled")
	})

	It("lists the caller's tasks newest first with cursor pagination", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](1), nil)
		var ids []string
		for i := range 5 {
			r := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"},
				"Idempotency-Key", fmt.Sprintf("list-%d", i))
			Expect(r.Status).To(Equal(http.StatusAccepted))
			ids = append([]string{r.JSON()["id"].(string)}, ids...) // newest first
			sleepSecond()                                           // creationTimestamp has one-second resolution; ties sort by name
		}
		Eventually(func() int { return len(api.get("/v1/tasks", a.key).JSON()["data"].([]any)) }).Should(Equal(5))
		page1 := api.get("/v1/tasks?limit=2", a.key).JSON()
		Expect(idsOf(page1)).To(Equal(ids[:2]))
		Expect(page1["has_more"]).To(BeTrue())
		page2 := api.get("/v1/tasks?limit=2&after="+ids[1], a.key).JSON()
		Expect(idsOf(page2)).To(Equal(ids[2:4]))
		page3 := api.get("/v1/tasks?limit=2&after="+ids[3], a.key).JSON()
		Expect(idsOf(page3)).To(Equal(ids[4:]))
		Expect(page3["has_more"]).To(BeFalse())

		Expect(api.get("/v1/tasks?limit=0", a.key).Status).To(Equal(http.StatusBadRequest))
		gone := api.get("/v1/tasks?after=vt-nope", a.key)
		Expect(gone.Status).To(Equal(http.StatusBadRequest))
		Expect(gone.Message()).To(ContainSubstring("list again from the first page"), "a cursor whose task was deleted says what to do")
		for _, never := range []string{"ushort_x", "../../x", "VT-Upper"} {
			bad := api.get("/v1/tasks?after="+url.QueryEscape(never), a.key)
			Expect(bad.Status).To(Equal(http.StatusBadRequest))
			Expect(bad.Message()).To(ContainSubstring("can be no task's id"), "a cursor that no task can have is not explained as a deleted task: %s", never)
			Expect(bad.Message()).NotTo(ContainSubstring("deleted"))
		}
	})
})

func idsOf(page map[string]any) []string {
	var ids []string
	for _, t := range page["data"].([]any) {
		ids = append(ids, t.(map[string]any)["id"].(string))
	}
	return ids
}

package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	_ "image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	reference "github.com/standard-webhooks/standard-webhooks/libraries/go"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// probeVideo returns duration (s), width, height of an MP4 with ffprobe.
func probeVideo(data []byte) (float64, int, int) {
	f := filepath.Join(GinkgoT().TempDir(), "out.mp4")
	Expect(os.WriteFile(f, data, 0o644)).To(Succeed())
	out, err := exec.Command("ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
		"stream=width,height:format=duration", "-of", "default=noprint_wrappers=1", f).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s", out)
	vals := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vals[k] = v
	}
	d, _ := strconv.ParseFloat(vals["duration"], 64)
	w, _ := strconv.Atoi(vals["width"])
	h, _ := strconv.Atoi(vals["height"])
	return d, w, h
}

var _ = Describe("The service, from outside", func() {
	It("lists templates by capability", func() {
		r := call("GET", "/v1/templates?capability=video.short", sys.apiKey, nil)
		Expect(r.status).To(Equal(http.StatusOK))
		Expect(r.json()["data"]).To(ContainElement(HaveKeyWithValue("id", sys.demo.ShortTemplate)))
		Expect(call("GET", "/v1/templates?capability=video.nope", sys.apiKey, nil).status).To(Equal(http.StatusBadRequest))
		Expect(call("GET", "/v1/templates", "vg_bad", nil).code()).To(Equal("invalid_api_key"))
	})

	It("makes a short video: points freeze, the video renders, the price is deducted", func() {
		before := points(sys.apiKey, "spent")
		r := call("POST", "/v1/videos/short", sys.apiKey, map[string]any{"template_id": sys.demo.ShortTemplate, "face": sys.demo.FaceURL},
			"Idempotency-Key", "e2e-short-1")
		Expect(r.status).To(Equal(http.StatusAccepted), "%s", r.body)
		id := r.json()["id"].(string)
		cost := int64(r.json()["cost"].(float64))

		// The same request again is the same task.
		replay := call("POST", "/v1/videos/short", sys.apiKey, map[string]any{"template_id": sys.demo.ShortTemplate, "face": sys.demo.FaceURL},
			"Idempotency-Key", "e2e-short-1")
		Expect(replay.status).To(Equal(http.StatusOK))
		Expect(replay.json()["id"]).To(Equal(id))

		task := waitTerminal(sys.apiKey, id)
		Expect(task["status"]).To(Equal("succeeded"), "%v", task["error"])
		Expect(task["charge"]).To(Equal("Deducted"))
		url := task["result"].(map[string]any)["video_url"].(string)
		d, w, h := probeVideo(download(url))
		Expect(d).To(BeNumerically("~", 3, 0.3))
		Expect([]int{w, h}).To(Equal([]int{320, 240}))
		Eventually(func() int64 { return points(sys.apiKey, "spent") }).Should(Equal(before + cost))

		// kubectl sees the same task.
		vt := &videogenv1alpha1.VideoTask{}
		Expect(sys.k8s.Get(ctx, client.ObjectKey{Namespace: sys.account, Name: id}, vt)).To(Succeed())
		Expect(vt.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded))
	})

	It("erases the watermark of a public video", func() {
		r := call("POST", "/v1/videos/eraser", sys.apiKey, map[string]any{"video": sys.demo.VideoURL})
		Expect(r.status).To(Equal(http.StatusAccepted), "%s", r.body)
		id := r.json()["id"].(string)
		task := waitTerminal(sys.apiKey, id)
		Expect(task["status"]).To(Equal("succeeded"), "%v", task["error"])
		d, _, _ := probeVideo(download(task["result"].(map[string]any)["video_url"].(string)))
		Expect(d).To(BeNumerically("~", 3, 0.3))

		if sys.jobBackend == "" {
			return
		}
		By("checking that both stages ran as Kubernetes Jobs whose pods completed")
		vt := &videogenv1alpha1.VideoTask{}
		Expect(sys.k8s.Get(ctx, client.ObjectKey{Namespace: sys.account, Name: id}, vt)).To(Succeed())
		Expect(vt.Status.Stages).To(HaveLen(2))
		for _, stage := range vt.Status.Stages {
			Expect(stage.Backend).To(Equal(sys.jobBackend), "stage %s", stage.Name)
		}
		jobs := &batchv1.JobList{}
		Expect(sys.k8s.List(ctx, jobs, client.InNamespace(sys.systemNS),
			client.MatchingLabels{"videogen.dev/task-uid": string(vt.UID)})).To(Succeed())
		Expect(jobs.Items).To(HaveLen(2))
		for _, job := range jobs.Items {
			Expect(job.Status.Succeeded).To(BeNumerically(">=", 1), "Job %s: %+v", job.Name, job.Status)
		}
	})

	It("renders an adjustable template at the chosen duration and a pose image", func() {
		r := call("POST", "/v1/videos/template", sys.apiKey, map[string]any{"template_id": sys.demo.TemplateTemplate, "duration": 2})
		Expect(r.status).To(Equal(http.StatusAccepted), "%s", r.body)
		p := call("POST", "/v1/images/pose", sys.apiKey, map[string]any{"template_id": sys.demo.PoseTemplate, "face": sys.demo.FaceURL})
		Expect(p.status).To(Equal(http.StatusAccepted), "%s", p.body)

		video := waitTerminal(sys.apiKey, r.json()["id"].(string))
		Expect(video["status"]).To(Equal("succeeded"), "%v", video["error"])
		d, _, _ := probeVideo(download(video["result"].(map[string]any)["video_url"].(string)))
		Expect(d).To(BeNumerically("~", 2, 0.15))

		pose := waitTerminal(sys.apiKey, p.json()["id"].(string))
		Expect(pose["status"]).To(Equal("succeeded"), "%v", pose["error"])
		_, format, err := image.DecodeConfig(bytes.NewReader(download(pose["result"].(map[string]any)["image_url"].(string))))
		Expect(err).NotTo(HaveOccurred())
		Expect(format).To(Equal("png"))
	})

	It("uses an account's own short template, and hides it from other accounts", func() {
		// The account's own template reuses the demo portrait's video as its target.
		portrait := &videogenv1alpha1.Template{}
		Expect(sys.k8s.Get(ctx, client.ObjectKey{Name: sys.demo.ShortTemplate}, portrait)).To(Succeed())
		st := call("POST", "/v1/short-templates", sys.apiKey, map[string]any{"name": "My portrait", "target_url": portrait.Spec.MediaURL})
		Expect(st.status).To(Equal(http.StatusCreated), "%s", st.body)
		id := st.json()["id"].(string)

		r := call("POST", "/v1/videos/short", sys.apiKey, map[string]any{"template_id": id, "face": sys.demo.FaceURL})
		Expect(r.status).To(Equal(http.StatusAccepted), "%s", r.body)
		Expect(waitTerminal(sys.apiKey, r.json()["id"].(string))["status"]).To(Equal("succeeded"))

		other := newAccount(0)
		Expect(call("DELETE", "/v1/short-templates/"+id, other.key, nil).status).To(Equal(http.StatusNotFound))
		Expect(call("DELETE", "/v1/short-templates/"+id, sys.apiKey, nil).status).To(Equal(http.StatusNoContent))
	})

	It("answers 402 on a short balance, and the same key works after an administrator's top-up", func() {
		a := newAccount(0)
		body := map[string]any{"template_id": sys.demo.ShortTemplate, "face": sys.demo.FaceURL}
		r := call("POST", "/v1/videos/short", a.key, body, "Idempotency-Key", "after-topup")
		Expect(r.status).To(Equal(http.StatusPaymentRequired))
		Expect(r.code()).To(Equal("insufficient_balance"))

		out, err := cli("topup", a.name, "100", "--reference", "E2E-INV-1")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("balance is now 100"))

		again := call("POST", "/v1/videos/short", a.key, body, "Idempotency-Key", "after-topup")
		Expect(again.status).To(Equal(http.StatusAccepted), "%s", again.body)
		Expect(waitTerminal(a.key, again.json()["id"].(string))["status"]).To(Equal("succeeded"))
		// The task's last write says Deducted; the account follows within a moment.
		Eventually(func() int64 { return points(a.key, "spent") }).Should(Equal(int64(30)))
		Expect(points(a.key, "balance")).To(Equal(int64(70)))

		show, err := cli("account", "show", a.name, "-o", "json")
		Expect(err).NotTo(HaveOccurred(), show)
		var view map[string]any
		Expect(json.Unmarshal([]byte(show), &view)).To(Succeed())
		Expect(view).To(HaveKeyWithValue("spent", BeNumerically("==", 30)))
	})

	It("shows a submission's freeze at once in GET /v1/balance, and in the PointAccount within a second", func() {
		a := newAccount(0)
		out, err := cli("topup", a.name, "1000", "--reference", "E2E-RYW-1")
		Expect(err).NotTo(HaveOccurred(), out)
		// A template that keeps its tasks running: nothing settles while we look.
		stall := receiver(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}))
		body := func(i int) map[string]any {
			return map[string]any{"template_id": sys.demo.ShortTemplate, "face": fmt.Sprintf("%s/face-%d.jpg", stall, i)}
		}
		for i := range 10 {
			r := call("POST", "/v1/videos/short", a.key, body(i))
			Expect(r.status).To(Equal(http.StatusAccepted), "%s", r.body)
			cost := int64(r.json()["cost"].(float64))
			// Read your writes: the very next read, not an eventual one.
			b := balance(a.key)
			Expect(b["frozen"]).To(BeNumerically("==", int64(i+1)*cost), "after the %d. 202", i+1)
			Expect(b["balance"]).To(BeNumerically("==", 1000-int64(i+1)*cost))
			Expect(b["credited"]).To(BeNumerically("==", 1000))
		}
		// The PointAccount (kubectl get pointaccount) follows within a second of the last change.
		Eventually(func() int64 {
			acct := &videogenv1alpha1.PointAccount{}
			Expect(sys.k8s.Get(ctx, client.ObjectKey{Namespace: a.name, Name: videogenv1alpha1.PointAccountName}, acct)).To(Succeed())
			return acct.Status.Frozen
		}).WithTimeout(1500 * time.Millisecond).WithPolling(50 * time.Millisecond).Should(Equal(int64(300)))
		for _, t := range call("GET", "/v1/tasks", a.key, nil).json()["data"].([]any) {
			Expect(call("POST", "/v1/tasks/"+t.(map[string]any)["id"].(string)+"/cancel", a.key, nil).status).To(Equal(http.StatusAccepted))
		}
		Eventually(func() int64 { return points(a.key, "balance") }).Should(Equal(int64(1000)))
	})

	It("refunds a task that times out", func() {
		// A face URL that never answers: the worker waits, the task's timeout fires first.
		stall := receiver(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
		}))
		before := balance(sys.apiKey)
		task := &videogenv1alpha1.VideoTask{
			ObjectMeta: metav1.ObjectMeta{Namespace: sys.account, Name: "e2e-timeout"},
			Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityShort, TemplateRef: sys.demo.ShortTemplate,
				Inputs:  videogenv1alpha1.TaskInputs{FaceImageURL: stall + "/face.jpg"},
				Timeout: &metav1.Duration{Duration: 4 * time.Second}},
		}
		Expect(sys.k8s.Create(ctx, task)).To(Succeed())
		done := waitTerminal(sys.apiKey, task.Name)
		Expect(done["status"]).To(Equal("failed"))
		Expect(done["error"]).To(HaveKeyWithValue("code", "timed_out"))
		Expect(done["charge"]).To(Equal("Refunded"))
		Eventually(func() float64 { return balance(sys.apiKey)["balance"].(float64) }).Should(BeNumerically(">=", before["balance"].(float64)))
	})

	It("delivers one signed completion webhook", func() {
		secret := call("GET", "/v1/webhook-secret", sys.apiKey, nil).json()["secret"].(string)
		wh, err := reference.NewWebhook(secret)
		Expect(err).NotTo(HaveOccurred())
		var mu sync.Mutex
		var got []map[string]any
		recv := receiver(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			defer GinkgoRecover()
			Expect(wh.Verify(body, r.Header)).To(Succeed())
			var task map[string]any
			Expect(json.Unmarshal(body, &task)).To(Succeed())
			mu.Lock()
			got = append(got, task)
			mu.Unlock()
		}))
		r := call("POST", "/v1/videos/template", sys.apiKey, map[string]any{"template_id": sys.demo.TemplateTemplate, "duration": 2, "webhook_url": recv + "/done"})
		Expect(r.status).To(Equal(http.StatusAccepted), "%s", r.body)
		id := r.json()["id"].(string)
		Eventually(func() int { mu.Lock(); defer mu.Unlock(); return len(got) }).Should(Equal(1))
		Expect(got[0]).To(And(HaveKeyWithValue("id", id), HaveKeyWithValue("status", "succeeded")))
		Eventually(func() any { return call("GET", "/v1/tasks/"+id, sys.apiKey, nil).json()["webhook"] }).
			Should(HaveKeyWithValue("status", "delivered"))
		Consistently(func() int { mu.Lock(); defer mu.Unlock(); return len(got) }, 2*time.Second).Should(Equal(1))
	})

	It("normalizes a webhook through EventService.Handle on the API port (Connect JSON)", func() {
		if sys.eventToken == "" {
			Skip("no service token for EventService.Handle (set E2E_EVENT_SERVICE_TOKEN)")
		}
		const whsec = "whsec_e2e_handle_secret"
		payload := `{"id":"evt_e2e_rpc","object":"event","type":"charge.dispute.created","created":1763700000,` +
			`"data":{"object":{"id":"dp_e2e","object":"dispute","amount":1500,"currency":"eur","status":"needs_response","reason":"fraudulent","charge":"ch_e2e"}}}`
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, []byte(whsec))
		mac.Write([]byte(ts + "." + payload))
		req := map[string]any{
			"connector": "stripe",
			"requestDetails": map[string]any{"method": "POST", "uri": "/webhooks/stripe",
				"headers": map[string]string{"Stripe-Signature": "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))},
				"body":    base64.StdEncoding.EncodeToString([]byte(payload))},
			"webhookSecrets": map[string]string{"secret": whsec},
		}
		const procedure = "/videogen.events.v1.EventService/Handle"
		r := call("POST", procedure, "", req, "Authorization", "Bearer "+sys.eventToken)
		Expect(r.status).To(Equal(http.StatusOK), "%s", r.body)
		got := r.json()
		Expect(got).To(HaveKeyWithValue("eventType", "DISPUTE_CREATED"))
		Expect(got).To(HaveKeyWithValue("sourceVerified", true))
		Expect(got).To(HaveKeyWithValue("merchantEventId", "evt_e2e_rpc"))
		Expect(got["dispute"]).To(HaveKeyWithValue("amountMinor", "1500"))
		Expect(r.header.Get("X-Request-Id")).To(HavePrefix("req_"), "behind the apiserver's middleware")

		// A wrong token and a tampered body are refused, each with its own code.
		bad := call("POST", procedure, "", req, "Authorization", "Bearer not-a-token")
		Expect(bad.status).To(Equal(http.StatusUnauthorized))
		req["requestDetails"].(map[string]any)["body"] = base64.StdEncoding.EncodeToString([]byte(strings.Replace(payload, "1500", "9999", 1)))
		tampered := call("POST", procedure, "", req, "Authorization", "Bearer "+sys.eventToken)
		Expect(tampered.status).To(Equal(http.StatusUnauthorized), "%s", tampered.body)
		Expect(string(tampered.body)).To(ContainSubstring("stripe"))
	})

	It("turns a verified payment webhook into one PaymentEvent, however often it is delivered", func() {
		const whsec = "whsec_e2e_stripe_secret"
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sys.systemNS, Name: "stripe-webhook-e2e",
			Labels: map[string]string{"videogen.dev/webhook-connector": "stripe"}}, StringData: map[string]string{"secret": whsec}}
		Expect(sys.k8s.Create(ctx, sec)).To(Succeed())
		DeferCleanup(func() { _ = sys.k8s.Delete(ctx, sec) })

		payload := []byte(`{"id":"evt_e2e_1","object":"event","type":"payment_intent.succeeded","created":1763700000,` +
			`"data":{"object":{"id":"pi_e2e_1","object":"payment_intent","amount":2000,"currency":"usd","status":"succeeded"}}}`)
		post := func(signature string) reply {
			return call("POST", "/v1/webhooks/stripe", "", string(payload), "Stripe-Signature", signature)
		}
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, []byte(whsec))
		mac.Write([]byte(ts + "." + string(payload)))
		good := "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))

		Expect(post("t=" + ts + ",v1=" + strings.Repeat("0", 64)).status).To(Equal(http.StatusUnauthorized))
		// The connector secret reaches the apiserver's cache within moments.
		Eventually(func() int { return post(good).status }).Should(Equal(http.StatusOK))
		again := post(good)
		Expect(again.status).To(Equal(http.StatusOK))
		Expect(again.json()).To(HaveKeyWithValue("duplicate", true))

		var events videogenv1alpha1.PaymentEventList
		Expect(sys.k8s.List(ctx, &events, client.InNamespace(sys.systemNS), client.MatchingLabels{"videogen.dev/connector": "stripe"})).To(Succeed())
		matching := 0
		for _, e := range events.Items {
			if e.Spec.MerchantEventID == "evt_e2e_1" {
				matching++
				Expect(string(e.Spec.EventType)).To(Equal("PAYMENT_INTENT_SUCCESS"))
			}
		}
		Expect(matching).To(Equal(1))
	})
})

// e2eAccount is an account made with the CLI, as an administrator would.
type e2eAccount struct{ name, key string }

var accounts sync.Mutex
var accountSeq int

func newAccount(credit int64) e2eAccount {
	accounts.Lock()
	accountSeq++
	name := fmt.Sprintf("e2e-%d-%d", GinkgoParallelProcess(), accountSeq)
	accounts.Unlock()
	out, err := cli("account", "create", name)
	Expect(err).NotTo(HaveOccurred(), out)
	out, err = cli("apikey", "create", "--account", name, "-o", "json")
	Expect(err).NotTo(HaveOccurred(), out)
	var issued map[string]string
	Expect(json.Unmarshal([]byte(out), &issued)).To(Succeed(), out)
	if credit > 0 {
		out, err := cli("topup", name, strconv.FormatInt(credit, 10), "--reference", "E2E")
		Expect(err).NotTo(HaveOccurred(), out)
	}
	a := e2eAccount{name: name, key: issued["key"]}
	Eventually(func() int { return call("GET", "/v1/balance", a.key, nil).status }).Should(Equal(http.StatusOK))
	return a
}

package apiserver_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

var _ = Describe("Errors", func() {
	var (
		a    account
		tmpl string
	)
	BeforeEach(func() {
		a = newAccount(100)
		tmpl = template(videogenv1alpha1.CapabilityShort, ptr.To[int64](10), nil)
	})

	It("refuses missing and bad API keys with 401 invalid_api_key", func() {
		for _, key := range []string{"", "nope", "vg_000000000000_" + strings.Repeat("A", 43), a.key + "x"} {
			resp := api.get("/v1/balance", key)
			Expect(resp.Status).To(Equal(http.StatusUnauthorized), "key %q", key)
			Expect(resp.ErrorCode()).To(Equal("invalid_api_key"))
		}
	})

	It("refuses a real key id with a wrong secret, and a revoked key once the apiserver sees the revocation", func() {
		// Same id, same length and alphabet; only the secret's first character differs.
		id, secret, _ := strings.Cut(strings.TrimPrefix(a.key, "vg_"), "_")
		other := "A"
		if secret[0] == 'A' {
			other = "B"
		}
		forged := "vg_" + id + "_" + other + secret[1:]
		Expect(forged).To(HaveLen(len(a.key)))
		resp := api.get("/v1/balance", forged)
		Expect(resp.Status).To(Equal(http.StatusUnauthorized))
		Expect(resp.ErrorCode()).To(Equal("invalid_api_key"))
		Expect(api.get("/v1/balance", a.key).Status).To(Equal(http.StatusOK), "the real key still works")

		Expect(apikeys.Revoke(ctx, k8sClient, keyNamespace, id)).To(Succeed())
		Eventually(func(g Gomega) {
			revoked := api.get("/v1/balance", a.key)
			g.Expect(revoked.Status).To(Equal(http.StatusUnauthorized))
			g.Expect(revoked.ErrorCode()).To(Equal("invalid_api_key"))
		}).Should(Succeed())
	})

	DescribeTable("answers bad task requests with 400 naming the field, and changes nothing",
		func(path string, body any, message string) {
			resp := api.post(path, a.key, body)
			Expect(resp.Status).To(Equal(http.StatusBadRequest), string(resp.Body))
			Expect(resp.ErrorCode()).To(Equal("invalid_request"))
			Expect(resp.Message()).To(ContainSubstring(message))
			Expect(tasksIn(a.ns)).To(BeEmpty())
			suite.ExpectBalanced(a.ns, 100, 0, 0)
		},
		Entry("missing template_id", "/v1/videos/short", map[string]any{"face": "https://cdn.example.com/f.jpg"}, `"template_id" is required`),
		Entry("empty face", "/v1/videos/short", map[string]any{"template_id": "x", "face": " "}, `"face" must not be empty`),
		Entry("unknown field", "/v1/videos/short", map[string]any{"template_id": "x", "face": "https://cdn.example.com/f.jpg", "speed": 2}, `unknown field "speed"`),
		Entry("wrong type", "/v1/videos/template", map[string]any{"template_id": "x", "duration": "ten"}, `field "duration" must be an integer, not a string`),
		Entry("negative duration (refused before the template is looked up)", "/v1/videos/template", map[string]any{"template_id": "x", "duration": -3}, `field "duration" must be from 1 to 3600`),
		Entry("malformed JSON", "/v1/videos/short", `{"template_id": "x",`, "malformed JSON"),
		Entry("two objects", "/v1/videos/short", `{"template_id":"x"} {}`, "exactly one JSON object"),
		Entry("not an object", "/v1/videos/short", `[1,2]`, "must be a JSON object"),
		Entry("null", "/v1/videos/eraser", ` null `, "must be a JSON object, not null"),
		Entry("empty body", "/v1/videos/short", "", "body is empty"),
		Entry("unknown template", "/v1/videos/short", map[string]any{"template_id": "no-such", "face": "https://cdn.example.com/f.jpg"}, `no template "no-such"`),
		Entry("loopback face URL", "/v1/videos/short", map[string]any{"template_id": "x", "face": "http://127.0.0.1/f.jpg"}, `"face"`),
		Entry("metadata URL", "/v1/videos/eraser", map[string]any{"video": "http://169.254.169.254/latest"}, `"video"`),
		Entry("IPv6-mapped loopback", "/v1/videos/eraser", map[string]any{"video": "http://[::ffff:127.0.0.1]/v.mp4"}, `"video"`),
		Entry("private webhook", "/v1/videos/eraser", map[string]any{"video": "https://cdn.example.com/v.mp4", "webhook_url": "http://192.168.1.1/hook"}, `"webhook_url"`),
		Entry("ftp video", "/v1/videos/eraser", map[string]any{"video": "ftp://cdn.example.com/v.mp4"}, `"video"`),
	)

	It("refuses a body over the size limit with 413 and a wrong content type with 415", func() {
		big := `{"template_id":"` + tmpl + `","face":"` + strings.Repeat("A", 17<<20) + `"}`
		resp := api.post("/v1/videos/short", a.key, big)
		Expect(resp.Status).To(Equal(http.StatusRequestEntityTooLarge))
		Expect(resp.ErrorCode()).To(Equal("payload_too_large"))
		xml := api.do(call{method: "POST", path: "/v1/videos/short", key: a.key, body: "<x/>", headers: map[string]string{"Content-Type": "text/xml"}})
		Expect(xml.Status).To(Equal(http.StatusUnsupportedMediaType))
		Expect(tasksIn(a.ns)).To(BeEmpty())
	})

	It("refuses a malformed Idempotency-Key", func() {
		resp := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"},
			"Idempotency-Key", strings.Repeat("k", 300))
		Expect(resp.Status).To(Equal(http.StatusBadRequest))
		Expect(resp.Message()).To(ContainSubstring("Idempotency-Key"))
	})

	It("answers unknown endpoints and ids with 404 not_found", func() {
		Expect(api.get("/v1/nothing-here", a.key).ErrorCode()).To(Equal("not_found"))
		missing := api.get("/v1/tasks/vt-doesnotexist", a.key)
		Expect(missing.Status).To(Equal(http.StatusNotFound))
		Expect(missing.ErrorCode()).To(Equal("not_found"))
	})

	It("answers a known path asked with another method with 405 method_not_allowed and Allow", func() {
		for _, c := range []struct{ method, path, allow string }{
			{"DELETE", "/v1/tasks/vt-x", "GET, HEAD"},
			{"GET", "/v1/videos/short", "POST"},
			{"POST", "/v1/tasks", "GET, HEAD"},
			{"GET", "/v1/tasks/vt-x/cancel", "POST"},
			{"PUT", "/v1/short-templates/ushort_x", "GET, HEAD, PATCH, DELETE"},
			{"DELETE", "/v1/short-templates", "GET, HEAD, POST"},
		} {
			resp := api.do(call{method: c.method, path: c.path, key: a.key})
			Expect(resp.Status).To(Equal(http.StatusMethodNotAllowed), "%s %s", c.method, c.path)
			Expect(resp.ErrorCode()).To(Equal("method_not_allowed"))
			Expect(resp.Header.Get("Allow")).To(Equal(c.allow), "%s %s", c.method, c.path)
		}
		Expect(api.do(call{method: "DELETE", path: "/v1/nothing-here", key: a.key}).ErrorCode()).To(Equal("not_found"))
		Expect(tasksIn(a.ns)).To(BeEmpty())
	})

	It("rate limits each key with 429 and Retry-After", func() {
		// b exists before the limited server starts, so its informer lists b's key at once
		// (a key issued later reaches the informer a moment later: a 401 in between).
		b := newAccount(0)
		limited := startAPIServer(rate.Every(time.Hour), 3, nil, nil)
		codes := map[int]int{}
		var last response
		for range 5 {
			last = limited.get("/v1/balance", a.key)
			codes[last.Status]++
		}
		Expect(codes).To(Equal(map[int]int{http.StatusOK: 3, http.StatusTooManyRequests: 2}))
		Expect(last.ErrorCode()).To(Equal("rate_limited"))
		Expect(last.Header.Get("Retry-After")).NotTo(BeEmpty())
		Expect(last.Message()).To(HaveSuffix("retry in "+last.Header.Get("Retry-After")+" s (Retry-After)"), "the message and the header name one wait")
		// Another key has its own bucket.
		Expect(limited.get("/v1/balance", b.key).Status).To(Equal(http.StatusOK))
	})

	It("answers 503 with Retry-After while no ledger answers, and creates nothing", func() {
		// A replica whose ledger (the elected manager) is away: a failover, say.
		away := startAPIServerWith(rate.Inf, 1, nil, nil, &ledger.Client{URL: "http://127.0.0.1:1",
			Backoff: wait.Backoff{Duration: 10 * time.Millisecond, Steps: 3}})
		body := map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"}
		resp := away.post("/v1/videos/short", a.key, body, "Idempotency-Key", "during-failover")
		Expect(resp.Status).To(Equal(http.StatusServiceUnavailable), string(resp.Body))
		Expect(resp.ErrorCode()).To(Equal("service_unavailable"))
		Expect(resp.Header.Get("Retry-After")).NotTo(BeEmpty())
		Expect(tasksIn(a.ns)).To(BeEmpty())
		Expect(away.get("/v1/balance", a.key).Status).To(Equal(http.StatusServiceUnavailable))
		suite.ExpectBalanced(a.ns, 100, 0, 0)
		// The key is free: the same request through a replica that reaches the ledger goes through.
		Expect(api.post("/v1/videos/short", a.key, body, "Idempotency-Key", "during-failover").Status).To(Equal(http.StatusAccepted))
	})

	It("answers 503 'did not answer in time', within the ledger call's deadline, while the ledger hangs, and creates nothing", func() {
		// A replica whose ledger (the elected manager) takes calls and never answers: kill -STOP.
		release := make(chan struct{})
		hung := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		DeferCleanup(func() { close(release); hung.Close() })
		stuck := startAPIServerWith(rate.Inf, 1, nil, nil, &ledger.Client{URL: hung.URL, Deadline: 300 * time.Millisecond})
		expectNoAnswer := func(resp response, took time.Duration, message string) {
			GinkgoHelper()
			Expect(resp.Status).To(Equal(http.StatusServiceUnavailable), string(resp.Body))
			Expect(resp.ErrorCode()).To(Equal("service_unavailable"))
			Expect(resp.Message()).To(Equal("the points ledger did not answer in time" + message))
			Expect(resp.Header.Get("Retry-After")).NotTo(BeEmpty())
			Expect(took).To(BeNumerically("<", 2*time.Second), "one ledger call's deadline (300 ms), not several")
		}
		for _, face := range []string{"https://cdn.example.com/f.jpg", pngOfSide(48)} {
			started := time.Now()
			resp := stuck.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": face}, "Idempotency-Key", "while-hung")
			expectNoAnswer(resp, time.Since(started), "; retry shortly (with the same Idempotency-Key)")
		}
		// Without a key a retry cannot find the task the call may have made: the client is
		// told to look, not to retry with a key it never sent.
		started := time.Now()
		resp := stuck.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"})
		expectNoAnswer(resp, time.Since(started), " and the task may have been created (it can take a few seconds to show in GET /v1/tasks); send an Idempotency-Key to retry a request safely")
		started = time.Now()
		expectNoAnswer(stuck.get("/v1/balance", a.key), time.Since(started), "; retry shortly")
		Expect(tasksIn(a.ns)).To(BeEmpty())
		Expect(storedBlobs(stuck)).To(BeEmpty(), "an inline face was stored for a task the ledger never admitted")
		suite.ExpectBalanced(a.ns, 100, 0, 0)
	})

	It("leaves nothing half-made when a replica dies after the ledger created the task: the retry is a replay", func() {
		dying := startAPIServerWith(rate.Inf, 1, nil, nil, dyingLedger{&ledger.Client{URL: ledgerURL}})
		postCutShort(dying, a.key, tmpl, "replica-died")
		Expect(tasksIn(a.ns)).To(HaveLen(1), "the ledger created the task before the replica died")
		resp := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/f.jpg"},
			"Idempotency-Key", "replica-died")
		Expect(resp.Status).To(Equal(http.StatusOK), string(resp.Body))
		Expect(resp.Header.Get("Idempotent-Replayed")).To(Equal("true"))
		Expect(tasksIn(a.ns)).To(HaveLen(1))
		expectCharged(a.ns, 90, 10)
	})

	It("counts requests by route and status in Prometheus metrics", func() {
		api.get("/v1/balance", a.key)
		families, err := registry.Gather()
		Expect(err).NotTo(HaveOccurred())
		Expect(counter(families, "videogen_api_requests_total", map[string]string{"route": "GET /v1/balance", "code": "200"})).
			To(BeNumerically(">=", 1))
	})

	// A 405 and a 404 of no route were counted under route "/", the catch-all that answers
	// them, so a by-route panel could not tell DELETE /v1/balance from a typo (SRE tour).
	It("counts a method a route does not serve under that route, and a path no route serves as unmatched", func() {
		Expect(api.do(call{method: http.MethodDelete, path: "/v1/balance", key: a.key}).Status).To(Equal(http.StatusMethodNotAllowed))
		Expect(api.get("/v1/no-such-thing", a.key).Status).To(Equal(http.StatusNotFound))
		Eventually(func(g Gomega) {
			families, err := registry.Gather()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(counter(families, "videogen_api_requests_total",
				map[string]string{"route": "/v1/balance", "method": "DELETE", "code": "405"})).To(BeNumerically(">=", 1))
			g.Expect(counter(families, "videogen_api_requests_total",
				map[string]string{"route": "unmatched", "method": "GET", "code": "404"})).To(BeNumerically(">=", 1))
			g.Expect(counter(families, "videogen_api_requests_total", map[string]string{"route": "/"})).To(BeZero())
		}).Should(Succeed())
	})

	It("records each request's latency in the histogram of its route", func() {
		route := map[string]string{"route": "GET /v1/tasks", "method": "GET", "code": "200"}
		samples := func() (uint64, float64) {
			families, err := registry.Gather()
			Expect(err).NotTo(HaveOccurred())
			return histogram(families, "videogen_api_request_duration_seconds", route)
		}
		count, sum := samples()
		Expect(api.get("/v1/tasks", a.key).Status).To(Equal(http.StatusOK))
		// The sample is recorded after the response is written: it may trail it a moment.
		Eventually(func(g Gomega) {
			c, s := samples()
			g.Expect(c).To(Equal(count + 1))
			g.Expect(s).To(BeNumerically(">", sum))
		}).Should(Succeed())
	})
})

// dyingLedger is the way to the ledger of a replica that dies as soon as the ledger answered.
type dyingLedger struct{ *ledger.Client }

func (d dyingLedger) CreateTask(ctx context.Context, t *videogenv1alpha1.VideoTask, price int64) (*videogenv1alpha1.VideoTask, error) {
	if _, err := d.Client.CreateTask(ctx, t, price); err != nil {
		return nil, err
	}
	panic(http.ErrAbortHandler) // the process is gone: no response
}

// postCutShort posts a short video request to an apiserver that dies while it handles it.
func postCutShort(dying *apiClient, key, tmpl, idempotencyKey string) {
	GinkgoHelper()
	body := `{"template_id":"` + tmpl + `","face":"https://cdn.example.com/f.jpg"}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dying.base+"/v1/videos/short", strings.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", idempotencyKey)
	_, err = dying.http.Do(req)
	Expect(err).To(HaveOccurred(), "the connection is cut")
}

func counter(families []*dto.MetricFamily, name string, want map[string]string) float64 {
	var total float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, want) {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// histogram returns the sample count and sum of the histograms name with the labels want.
func histogram(families []*dto.MetricFamily, name string, want map[string]string) (uint64, float64) {
	var count uint64
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, want) {
				count += m.GetHistogram().GetSampleCount()
				sum += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return count, sum
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// noWatch lets the interceptor wrap a manager's client, which has no Watch.
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("watch is not supported")
}

package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/time/rate"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver"
	"github.com/videogen-dev/videogen-operator/ledger"
)

var _ = Describe("An Idempotency-Key still in use", func() {
	var (
		a    account
		body map[string]any
	)
	BeforeEach(func() {
		a = newAccount(0)
		topUp(a.ns, 100)
		body = map[string]any{"template_id": template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil),
			"face": "https://cdn.example.com/face.jpg"}
	})

	// A request with the key is between its admission and its create: with reservations, a
	// second one waits for it and then replays its task (docs/api.md); nothing is frozen twice.
	It("makes a second request wait for the first with the same key, then replays it", func() {
		release := make(chan struct{})
		entered := make(chan struct{}, 1)
		srv := startAPIServer(rate.Inf, 1, nil, func(c client.Client) client.Client {
			return interceptor.NewClient(noWatch{c}, interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if _, ok := obj.(*videogenv1alpha1.VideoTask); ok {
						select {
						case entered <- struct{}{}:
							<-release // only the first create is held
						default:
						}
					}
					return c.Create(ctx, obj, opts...)
				},
			})
		})
		answers := make(chan response, 2)
		send := func() {
			defer GinkgoRecover()
			answers <- srv.post("/v1/videos/short", a.key, body, "Idempotency-Key", "in-flight")
		}
		go send()
		Eventually(entered).Should(Receive())
		go send()
		Consistently(answers, "500ms").ShouldNot(Receive(), "the second request waits for the first")

		close(release)
		var first, second response
		Eventually(answers).Should(Receive(&first))
		Eventually(answers).Should(Receive(&second))
		Expect(first.Status).To(Equal(http.StatusAccepted), string(first.Body))
		Expect(second.Status).To(Equal(http.StatusOK), string(second.Body))
		Expect(second.Header.Get("Idempotent-Replayed")).To(Equal("true"))
		Expect(second.JSON()["id"]).To(Equal(first.JSON()["id"]))
		Expect(tasksIn(a.ns)).To(HaveLen(1))
		expectCharged(a.ns, 70, 30)
	})

	// Per task, the key's points were frozen and settled but its task is nowhere to be seen
	// (just deleted, or not yet in any cache): 409 rather than a second freeze.
	It("answers 409 when the key's settlement is on record but its task is not (per-task freeze)", func() {
		srv := perTaskServer()
		// The PointAccount controller trims a settlement record 2 s after it is made, or at
		// once along with other work: let it finish with the top-up's record first.
		Eventually(func() int { return len(balanceOf(a.ns).TopUps) }).Should(BeZero())
		name := apiserver.TaskName(a.ns, "settled")
		l := ledger.New(k8sClient, k8sClient)
		_, err := l.Do(ctx, a.ns, ledger.Freeze(name, 30))
		Expect(err).NotTo(HaveOccurred())
		_, err = l.Do(ctx, a.ns, ledger.Settle(name, videogenv1alpha1.SettlementRefunded))
		Expect(err).NotTo(HaveOccurred())

		resp := srv.post("/v1/videos/short", a.key, body, "Idempotency-Key", "settled")
		Expect(resp.Status).To(Equal(http.StatusConflict), string(resp.Body))
		Expect(resp.ErrorCode()).To(Equal("idempotency_key_in_use"))
		Expect(tasksIn(a.ns)).To(BeEmpty())
		expectPoints(a.ns, 100, 0, 0)
	})
})

var _ = Describe("Operability", func() {
	It("logs one structured line per request, carrying its request id", func() {
		var logs bytes.Buffer
		srv := apiserver.New(apiserver.Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/openapi.json", nil))
		Expect(rec.Code).To(Equal(http.StatusOK))
		id := rec.Header().Get("X-Request-Id")
		Expect(id).To(HavePrefix("req_"))

		var line map[string]any
		Expect(json.Unmarshal(logs.Bytes(), &line)).To(Succeed(), logs.String())
		Expect(line).To(HaveKeyWithValue("msg", "request"))
		Expect(line).To(HaveKeyWithValue("request_id", id))
		Expect(line).To(HaveKeyWithValue("route", "GET /v1/openapi.json"))
		Expect(line).To(HaveKeyWithValue("status", BeNumerically("==", 200)))
	})

	It("answers /healthz on the API port", func() {
		rec := httptest.NewRecorder()
		apiserver.New(apiserver.Config{}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		Expect(rec.Code).To(Equal(http.StatusOK))
		Expect(rec.Body.String()).To(Equal("ok"))
	})
})

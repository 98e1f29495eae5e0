package apiserver_test

import (
	"fmt"
	"net/http"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/time/rate"
	"k8s.io/utils/ptr"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

var _ = Describe("Points at submission and Idempotency-Key", func() {
	var (
		a    account
		tmpl string
		body map[string]any
	)
	BeforeEach(func() {
		a = newAccount(0)
		tmpl = template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil)
		body = map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/face.jpg"}
	})

	DescribeTable("answers 402, creates nothing, and leaves the key free for after a top-up",
		func(server func() *apiClient) {
			srv := server()
			resp := srv.post("/v1/videos/short", a.key, body, "Idempotency-Key", "order-1")
			Expect(resp.Status).To(Equal(http.StatusPaymentRequired))
			Expect(resp.ErrorCode()).To(Equal("insufficient_balance"))
			Expect(resp.Message()).To(ContainSubstring("top-up"))
			Expect(tasksIn(a.ns)).To(BeEmpty())
			suite.ExpectBalanced(a.ns, 0, 0, 0)

			topUp(a.ns, 100)
			again := srv.post("/v1/videos/short", a.key, body, "Idempotency-Key", "order-1")
			Expect(again.Status).To(Equal(http.StatusAccepted), string(again.Body))
			expectCharged(a.ns, 70, 30)
		},
		Entry("through one replica", firstReplica),
		Entry("through another replica", secondReplica),
	)

	It("replays the same task for the same key and body, without a second charge", func() {
		topUp(a.ns, 100)
		first := api.post("/v1/videos/short", a.key, body, "Idempotency-Key", "order-2")
		Expect(first.Status).To(Equal(http.StatusAccepted))
		Expect(first.JSON()["cost"]).To(BeNumerically("==", 30))
		replay := api.post("/v1/videos/short", a.key, body, "Idempotency-Key", "order-2")
		Expect(replay.Status).To(Equal(http.StatusOK))
		Expect(replay.Header.Get("Idempotent-Replayed")).To(Equal("true"))
		Expect(replay.JSON()["id"]).To(Equal(first.JSON()["id"]))
		// Before the controller accepts the task too, the replay and a GET show the cost of the 202.
		Expect(replay.JSON()["cost"]).To(Equal(first.JSON()["cost"]))
		Expect(api.get("/v1/tasks/"+first.JSON()["id"].(string), a.key).JSON()["cost"]).To(Equal(first.JSON()["cost"]))
		Expect(tasksIn(a.ns)).To(HaveLen(1))

		// Still the same task after it finished: the key is kept as long as the task.
		waitTask(a, first.JSON()["id"].(string), "succeeded")
		late := api.post("/v1/videos/short", a.key, body, "Idempotency-Key", "order-2")
		Expect(late.Status).To(Equal(http.StatusOK))
		Expect(late.JSON()["status"]).To(Equal("succeeded"))
		suite.ExpectBalanced(a.ns, 70, 0, 30)
	})

	It("refuses the same key with a different body with 422, moving nothing", func() {
		topUp(a.ns, 100)
		Expect(api.post("/v1/videos/short", a.key, body, "Idempotency-Key", "order-3").Status).To(Equal(http.StatusAccepted))
		other := map[string]any{"template_id": tmpl, "face": "https://cdn.example.com/another-face.jpg"}
		resp := api.post("/v1/videos/short", a.key, other, "Idempotency-Key", "order-3")
		Expect(resp.Status).To(Equal(http.StatusUnprocessableEntity))
		Expect(resp.ErrorCode()).To(Equal("idempotency_key_reused"))
		eraser := api.post("/v1/videos/eraser", a.key, map[string]any{"video": "https://cdn.example.com/v.mp4"}, "Idempotency-Key", "order-3")
		Expect(eraser.Status).To(Equal(http.StatusUnprocessableEntity), "the same key on another endpoint is another body")
		// The message once said "a different request body", which the eraser's caller did not send.
		Expect(eraser.Message()).To(ContainSubstring("another endpoint"))
		Expect(tasksIn(a.ns)).To(HaveLen(1))
		expectCharged(a.ns, 70, 30)
	})

	It("does not consume the key on a validation error", func() {
		topUp(a.ns, 100)
		bad := api.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": ""}, "Idempotency-Key", "order-4")
		Expect(bad.Status).To(Equal(http.StatusBadRequest))
		Expect(api.post("/v1/videos/short", a.key, body, "Idempotency-Key", "order-4").Status).To(Equal(http.StatusAccepted))
	})

	It("keys are per account: the same key in two accounts makes two tasks", func() {
		topUp(a.ns, 100)
		b := newAccount(100)
		r1 := api.post("/v1/videos/short", a.key, body, "Idempotency-Key", "shared")
		r2 := api.post("/v1/videos/short", b.key, body, "Idempotency-Key", "shared")
		Expect(r1.Status).To(Equal(http.StatusAccepted))
		Expect(r2.Status).To(Equal(http.StatusAccepted))
		expectCharged(a.ns, 70, 30)
		expectCharged(b.ns, 70, 30)
	})

	DescribeTable("creates one task and freezes once for 100 concurrent requests with one key",
		func(server func() *apiClient) {
			srv := server()
			topUp(a.ns, 1000)
			statuses := concurrently(100, func(int) response {
				return srv.post("/v1/videos/short", a.key, body, "Idempotency-Key", "burst")
			})
			// One 202; the others replay it (200) or, while its create is under way, are told to
			// retry (409).
			Expect(statuses[http.StatusAccepted]).To(Equal(1), "%v", statuses)
			Expect(statuses[http.StatusAccepted]+statuses[http.StatusOK]+statuses[http.StatusConflict]).To(Equal(100), "%v", statuses)
			Expect(tasksIn(a.ns)).To(HaveLen(1))
			expectCharged(a.ns, 970, 30)
		},
		Entry("through one replica", firstReplica),
		Entry("through another replica", secondReplica),
	)

	DescribeTable("lets exactly 40 of 100 concurrent different requests through on an account that can afford 40",
		func(server func() *apiClient) {
			srv := server()
			topUp(a.ns, 40*30)
			statuses := concurrently(100, func(i int) response {
				return srv.post("/v1/videos/short", a.key, body, "Idempotency-Key", fmt.Sprintf("many-%d", i))
			})
			Expect(statuses).To(Equal(map[int]int{http.StatusAccepted: 40, http.StatusPaymentRequired: 60}))
			Expect(tasksIn(a.ns)).To(HaveLen(40))
			// The balance, on any replica, at once; the PointAccount's status within a second.
			for _, r := range []*apiClient{srv, api} {
				b := r.get("/v1/balance", a.key).JSON()
				Expect(b["balance"]).To(BeNumerically("==", 0))
				Expect(b["frozen"].(float64) + b["spent"].(float64)).To(BeNumerically("==", 1200))
			}
			expectCharged(a.ns, 0, 1200)
		},
		Entry("through one replica", firstReplica),
		Entry("through another replica", secondReplica),
	)

	It("lets exactly what an account affords through two replicas", func() {
		topUp(a.ns, 13*30+20) // 13 tasks and 20 points
		other := startAPIServer(rate.Inf, 1, nil, nil)
		replicas := []*apiClient{api, other}
		statuses := concurrently(60, func(i int) response {
			return replicas[i%2].post("/v1/videos/short", a.key, body, "Idempotency-Key", fmt.Sprintf("two-%d", i))
		})
		// Both replicas ask the one ledger: no balance is split between them.
		Expect(statuses).To(Equal(map[int]int{http.StatusAccepted: 13, http.StatusPaymentRequired: 47}))
		Expect(tasksIn(a.ns)).To(HaveLen(13))
		for i, r := range replicas {
			Expect(r.post("/v1/videos/short", a.key, body, "Idempotency-Key", fmt.Sprintf("one-too-many-%d", i)).Status).
				To(Equal(http.StatusPaymentRequired))
		}
		expectCharged(a.ns, 20, 13*30)
	})
})

// concurrently runs n calls at once and counts the statuses.
func concurrently(n int, f func(int) response) map[int]int {
	var mu sync.Mutex
	var wg sync.WaitGroup
	counts := map[int]int{}
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			defer GinkgoRecover()
			<-start
			r := f(i)
			mu.Lock()
			counts[r.Status]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return counts
}

package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/santhosh-tekuri/jsonschema/v6"
	reference "github.com/standard-webhooks/standard-webhooks/libraries/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/outbound"
	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
	"github.com/videogen-dev/videogen-operator/internal/taskview"
)

var _ = Describe("OpenAPI document's completion webhook", func() {
	const hook = "/webhooks/taskCompleted/post"

	// deliver sends task's completion webhook as the manager does (the body, id and signature of
	// controllers' webhook delivery) to a receiver here, and returns what it received.
	deliver := func(task *videogenv1alpha1.VideoTask, secret string) (http.Header, []byte) {
		var header http.Header
		var body []byte
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			header = r.Header.Clone()
			body, _ = io.ReadAll(r.Body)
		}))
		defer receiver.Close()
		client := outbound.NewGuardedClient(netguard.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, 5*time.Second)
		view, err := json.Marshal(taskview.Of(task))
		Expect(err).NotTo(HaveOccurred())
		res := outbound.Send(context.Background(), client, outbound.Message{URL: receiver.URL, ID: controllers.WebhookID(task), Secrets: []string{secret}, Body: view}, time.Now())
		Expect(res.Outcome).To(Equal(outbound.Delivered), "%v", res.Err)
		return header, body
	}

	It("describes the body and Standard Webhooks headers the manager sends", func() {
		loadSpec()
		done := metav1.NewTime(time.Now().Add(-time.Second))
		task := &videogenv1alpha1.VideoTask{
			ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-done", UID: types.UID("6f1e0b9c-5d1e-4c52-9a43-0b2f6f0c2d11"),
				CreationTimestamp: metav1.NewTime(done.Add(-time.Minute))},
			Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityShort, TemplateRef: "demo-portrait",
				WebhookURL: "https://hooks.example.com/done"},
			Status: videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskSucceeded, Progress: 100, Cost: ptr.To[int64](30),
				Charge: videogenv1alpha1.ChargeDeducted, StartedAt: &done, CompletedAt: &done,
				Stages: []videogenv1alpha1.StageStatus{{Name: videogenv1alpha1.StageAnalyze, State: videogenv1alpha1.StageSucceeded, Progress: 100},
					{Name: videogenv1alpha1.StageRender, State: videogenv1alpha1.StageSucceeded, Progress: 100}},
				Result: &videogenv1alpha1.TaskResult{URL: "https://cdn.example.com/r.mp4", MediaType: "video/mp4"}},
		}
		secret := standardwebhooks.NewSecret()
		header, body := deliver(task, secret)

		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		Expect(schemaAt(hook+"/requestBody/content/application~1json/schema").Validate(inst)).To(Succeed(), "%s", body)
		params := spec["webhooks"].(map[string]any)["taskCompleted"].(map[string]any)["post"].(map[string]any)["parameters"].([]any)
		Expect(params).NotTo(BeEmpty())
		for i, p := range params {
			p := p.(map[string]any)
			value := header.Get(p["name"].(string))
			if value == "" {
				Expect(p["required"]).NotTo(Equal(true), "required header %s missing", p["name"])
				continue
			}
			Expect(schemaAt(fmt.Sprintf("%s/parameters/%d/schema", hook, i)).Validate(value)).To(Succeed(), "header %s: %q", p["name"], value)
		}
		// What docs/api.md's receiver does: the official library accepts the delivery.
		wh, err := reference.NewWebhook(secret)
		Expect(err).NotTo(HaveOccurred())
		Expect(wh.Verify(body, header)).To(Succeed())

		// Only ended tasks are sent: the schema refuses a running one.
		task.Status.Phase = videogenv1alpha1.TaskRunning
		running, err := jsonschema.UnmarshalJSON(bytes.NewReader(must(json.Marshal(taskview.Of(task)))))
		Expect(err).NotTo(HaveOccurred())
		Expect(schemaAt(hook + "/requestBody/content/application~1json/schema").Validate(running)).NotTo(Succeed())
	})
})

func must[T any](v T, err error) T {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred())
	return v
}

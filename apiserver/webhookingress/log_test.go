package webhookingress_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/videogen-dev/videogen-operator/apiserver/connectorsecrets"
	"github.com/videogen-dev/videogen-operator/apiserver/webhookingress"
)

// syncBuffer is a log destination the test reads while the server writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines decodes every line written so far, each of which must be a JSON object.
func (b *syncBuffer) lines() []map[string]any {
	GinkgoHelper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b.buf.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		Expect(json.Unmarshal(line, &m)).To(Succeed(), "a log line that is not JSON: %s", line)
		out = append(out, m)
	}
	return out
}

var _ = Describe("The ingress's log lines, set up as cmd/apiserver does", func() {
	It("go to the server's logger, as JSON with the request_id of the 409 the processor got", func() {
		ns := newNamespace("log")
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stripe-webhook",
				Labels: map[string]string{connectorsecrets.LabelConnector: "stripe"}},
			StringData: map[string]string{connectorsecrets.KeySecret: stripeSecret},
		})).To(Succeed())
		out := &syncBuffer{}
		in := startConfiguredIngress(ns, webhookingress.Config{Logger: slog.New(slog.NewJSONHandler(out, nil))})

		body := stripeEvent("evt_local_1")
		Expect(in.postStripe(body, stripeSecret).status).To(Equal(http.StatusOK))
		other := bytes.Replace(body, []byte(`"status": "needs_response"`), []byte(`"status": "won"`), 1)
		a := in.postStripe(other, stripeSecret)
		Expect(a.status).To(Equal(http.StatusConflict))
		Expect(a.requestID).To(HavePrefix("req_"))

		Expect(out.lines()).To(ContainElement(SatisfyAll(
			HaveKeyWithValue("level", "WARN"),
			HaveKeyWithValue("msg", "webhookingress: a different event with the same id is already stored"),
			HaveKeyWithValue("merchant_event_id", "evt_local_1"),
			HaveKeyWithValue("request_id", a.requestID),
		)), "log:\n%s", &out.buf)
	})
})

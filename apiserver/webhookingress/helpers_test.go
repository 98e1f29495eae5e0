package webhookingress_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
	"github.com/videogen-dev/videogen-operator/apiserver/webhookingress"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

const stripeSecret = "whsec_ingress_test"

// stripeEvent is a charge.dispute.created event with the given id.
func stripeEvent(id string) []byte {
	return []byte(fmt.Sprintf(`{
  "id": %q, "object": "event", "type": "charge.dispute.created", "created": %d,
  "data": {"object": {"id": "dp_%s", "object": "dispute", "amount": 2000, "currency": "usd",
    "charge": "ch_1", "payment_intent": "pi_1", "reason": "fraudulent", "status": "needs_response", "created": %d}}
}`, id, time.Now().Unix(), id, time.Now().Unix()))
}

// signStripe builds a Stripe-Signature header with crypto/hmac only, independently of the
// connectors under test.
func signStripe(secret string, at time.Time, body []byte) string {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// ingress is a real HTTP server around a Handler storing in ns.
type ingress struct {
	server   *httptest.Server
	ns       string
	registry *prometheus.Registry
}

type ingressOption func(*webhookingress.Options)

func startIngress(ns string, src eventservice.SecretSource, opts ...ingressOption) *ingress {
	svc, err := eventservice.New(src)
	Expect(err).NotTo(HaveOccurred())
	reg := prometheus.NewRegistry()
	metrics, err := webhookingress.NewMetrics(reg)
	Expect(err).NotTo(HaveOccurred())
	o := webhookingress.Options{Service: svc, Client: k8sClient, Namespace: ns, Metrics: metrics}
	for _, opt := range opts {
		opt(&o)
	}
	h, err := webhookingress.New(o)
	Expect(err).NotTo(HaveOccurred())
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	DeferCleanup(srv.Close)
	return &ingress{server: srv, ns: ns, registry: reg}
}

type answer struct {
	status    int
	requestID string
	ack       webhookingress.Ack
	err       httpjson.Error
}

func (in *ingress) post(connector string, body []byte, header http.Header) answer {
	GinkgoHelper()
	return in.send(in.request(connector, body, header))
}

// request builds a JSON delivery of body to connector, with header added as given; change it
// (its Host, say) before handing it to send.
func (in *ingress) request(connector string, body []byte, header http.Header) *http.Request {
	GinkgoHelper()
	req, err := http.NewRequest(http.MethodPost, in.server.URL+"/v1/webhooks/"+connector, bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

// send delivers req and decodes the answer: the Ack of a 2xx, the error shape otherwise.
func (in *ingress) send(req *http.Request) answer {
	GinkgoHelper()
	resp, err := in.server.Client().Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	a := answer{status: resp.StatusCode, requestID: resp.Header.Get("X-Request-Id")}
	if resp.StatusCode < 300 {
		Expect(json.Unmarshal(raw, &a.ack)).To(Succeed(), "body %s", raw)
	} else {
		Expect(json.Unmarshal(raw, &struct {
			Error *httpjson.Error `json:"error"`
		}{&a.err})).To(Succeed(), "body %s", raw)
	}
	return a
}

// postStripe delivers body signed with secret now.
func (in *ingress) postStripe(body []byte, secret string) answer {
	GinkgoHelper()
	return in.post("stripe", body, http.Header{"Stripe-Signature": {signStripe(secret, time.Now(), body)}})
}

func (in *ingress) paymentEvents() []videogenv1alpha1.PaymentEvent {
	GinkgoHelper()
	var list videogenv1alpha1.PaymentEventList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(in.ns))).To(Succeed())
	return list.Items
}

// counter reads a counter of the ingress's own registry.
func (in *ingress) counter(name string, labels map[string]string) float64 {
	GinkgoHelper()
	families, err := in.registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

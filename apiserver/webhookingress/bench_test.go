package webhookingress

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
)

// memoryStore keeps PaymentEvents in a map: the fake client rebuilds a REST mapper on every
// create, which would drown the ingress's own cost.
type memoryStore struct {
	client.Client
	mu     sync.Mutex
	events map[string]*videogenv1alpha1.PaymentEvent
}

func (m *memoryStore) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.events[obj.GetName()]; ok {
		return apierrors.NewAlreadyExists(schema.GroupResource{Group: "videogen.dev", Resource: "paymentevents"}, obj.GetName())
	}
	m.events[obj.GetName()] = obj.(*videogenv1alpha1.PaymentEvent).DeepCopy()
	return nil
}

func (m *memoryStore) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	pe, ok := m.events[key.Name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: "videogen.dev", Resource: "paymentevents"}, key.Name)
	}
	pe.DeepCopyInto(obj.(*videogenv1alpha1.PaymentEvent))
	return nil
}

// BenchmarkIngress measures one delivery through the handler (read, verify, normalize, store,
// answer) against an in-memory store, so the figure is the ingress's own cost without the
// apiserver round trip. "new" stores a fresh event each time, "duplicate" answers a
// redelivery (create refused, get).
func BenchmarkIngress(b *testing.B) {
	const secret = "whsec_bench"
	svc, err := eventservice.New(eventservice.StaticSecrets{"stripe": {secret}})
	if err != nil {
		b.Fatal(err)
	}
	newHandler := func() *Handler {
		h, err := New(Options{Service: svc, Client: &memoryStore{events: map[string]*videogenv1alpha1.PaymentEvent{}}, Namespace: "payments"})
		if err != nil {
			b.Fatal(err)
		}
		return h
	}
	request := func(id string) *http.Request {
		body := []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":"payment_intent.succeeded","created":%d,`+
			`"data":{"object":{"id":"pi_1","object":"payment_intent","amount":2000,"currency":"usd","status":"succeeded"}}}`,
			id, time.Now().Unix()))
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "."))
		mac.Write(body)
		r := httptest.NewRequest(http.MethodPost, "/v1/webhooks/stripe", bytes.NewReader(body))
		r.SetPathValue("connector", "stripe")
		r.Header.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(mac.Sum(nil)))
		return r
	}
	serve := func(b *testing.B, h *Handler, r *http.Request) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}

	b.Run("new", func(b *testing.B) {
		h := newHandler()
		reqs := make([]*http.Request, b.N)
		for i := range reqs {
			reqs[i] = request(fmt.Sprintf("evt_bench_%d", i))
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			serve(b, h, reqs[i])
		}
	})
	b.Run("duplicate", func(b *testing.B) {
		h := newHandler()
		serve(b, h, request("evt_bench_dup"))
		reqs := make([]*http.Request, b.N)
		for i := range reqs {
			reqs[i] = request("evt_bench_dup")
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			serve(b, h, reqs[i])
		}
	})
}

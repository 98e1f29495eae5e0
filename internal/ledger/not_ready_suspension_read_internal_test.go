package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// The not_ready reasons: a create on a suspended (or closing) account
// is refused only after the kube-apiserver confirms the suspension (acceptingNow: the books'
// copy may lag). When that confirming read FAILED (a 500, a timeout, a 429 of the
// kube-apiserver under load), the ledger answered not_ready with the reason "account", and the
// REST apiserver told the suspended customer "the points ledger is catching up with a change to
// this account (created, or its suspension lifted, moments ago)": a suspended customer is told
// the suspension was lifted, and the on-call looks for an account change that never happened,
// while the cause is the cluster. 3a931c5 had fixed this for noAccount's read only.
// Interleaving, every step ordinary: 1. an administrator suspends the account (the books'
// copy says so); 2. the kube-apiserver fails the ledger's read of the account (overload,
// etcd timeout); 3. the customer's POST /v1/tasks reaches the ledger. Want: reason "busy"
// (the cluster did not answer), as for noAccount's failed read.
func TestAFailedSuspensionReadIsBusyNotAnAccountChange(t *testing.T) {
	h := newHarness(t, 100)
	must(t, retryOnConflict(func() error {
		a := h.account()
		a.Spec.Suspended = true
		return k8s.Update(h.ctx, a)
	}))
	var fail atomic.Bool
	failing := interceptor.NewClient(k8s, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*videogenv1alpha1.PointAccount); ok && fail.Load() {
				return apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	l2 := h.startWith(h.ctx, "ledger-2", func(c *Config) { c.Reader = failing })
	b, err := l2.lockBook(h.ns)
	must(t, err)
	suspended := b.account.Spec.Suspended
	b.mu.Unlock()
	if !suspended {
		t.Fatal("the books were built without the suspension")
	}
	srv := httptest.NewServer(Handler(l2))
	defer srv.Close()
	fail.Store(true)
	data, _ := json.Marshal(createRequest{Price: 10, Task: &videogenv1alpha1.VideoTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "a"}, Spec: h.task("a").Spec}})
	resp, err := http.Post(srv.URL+"/ledger/v1/namespaces/"+h.ns+"/tasks", "application/json", strings.NewReader(string(data)))
	must(t, err)
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code, Message, Reason string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Code != codeNotReady {
		t.Fatalf("a create on a suspended account whose read failed: %d %+v, want 503 not_ready", resp.StatusCode, e.Error)
	}
	if e.Error.Reason != NotReadyBusy {
		t.Errorf("a create on a suspended account whose confirming read failed: reason %q (%s), want %q: nothing about the account changed",
			e.Error.Reason, e.Error.Message, NotReadyBusy)
	}
}

package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// The ledger's not_ready said nothing of why, and the
// REST apiserver told every customer "the service is electing its points ledger" when it
// outlasted the deadline, though the elected manager answers not_ready for one account's lag
// while it keeps the books (apiserver's TestTheNotReadyMessageSaysWhatIsTrue has the
// customer's side). Each cause below is forced on an elected ledger through its HTTP handler:
// 1. a suspension lifted on the kube-apiserver that the books' copy (the informer's) still
// shows (an administrator's kubectl patch, a watch behind); 2. an account created whose Add
// event has not come (GET balance, POST tasks: noAccount reads it); 3. a ledger that does not
// keep the books (not elected, starting, or deposed); 4. a 429 of the kube-apiserver; 5. a read
// of the account that failed (a 500 of the kube-apiserver). Want: the answer's reason says
// which (account, account, electing, busy, busy).
func TestTheLedgersNotReadySaysWhy(t *testing.T) {
	h := newHarness(t, 100)
	srv := httptest.NewServer(Handler(h.l))
	defer srv.Close()
	reason := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct {
			Error struct{ Code, Message, Reason string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Code != codeNotReady {
			t.Fatalf("%s %s: %d %+v, want 503 not_ready", method, path, resp.StatusCode, e.Error)
		}
		return e.Error.Reason
	}
	create := func(ns, name string) string {
		data, _ := json.Marshal(createRequest{Price: 10, Task: &videogenv1alpha1.VideoTask{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: h.task(name).Spec}})
		return string(data)
	}

	// 1. Suspended in the books, lifted on the kube-apiserver.
	var acct *videogenv1alpha1.PointAccount
	must(t, retryOnConflict(func() error {
		acct = h.account()
		acct.Spec.Suspended = true
		return k8s.Update(h.ctx, acct)
	}))
	h.l.accountEvent(h.ctx, acct, false)
	must(t, retryOnConflict(func() error {
		a := h.account()
		a.Spec.Suspended = false
		return k8s.Update(h.ctx, a)
	}))
	if r := reason(http.MethodPost, "/ledger/v1/namespaces/"+h.ns+"/tasks", create(h.ns, "a")); r != NotReadyAccount {
		t.Errorf("a suspension lifted that the books' copy still shows: reason %q, want %q", r, NotReadyAccount)
	}

	// 2. An account created whose Add has not come.
	ns := "t-" + string(uuid.NewUUID())[:8]
	must(t, k8s.Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	must(t, k8s.Create(h.ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: videogenv1alpha1.PointAccountName}}))
	if r := reason(http.MethodGet, "/ledger/v1/namespaces/"+ns+"/balance", ""); r != NotReadyAccount {
		t.Errorf("the balance of an account whose Add has not come: reason %q, want %q", r, NotReadyAccount)
	}
	if r := reason(http.MethodPost, "/ledger/v1/namespaces/"+ns+"/tasks", create(ns, "b")); r != NotReadyAccount {
		t.Errorf("a create on an account whose Add has not come: reason %q, want %q", r, NotReadyAccount)
	}

	// 4. A 429 of the kube-apiserver (the reason writeLedgerError gives it).
	rec := httptest.NewRecorder()
	writeLedgerError(rec, apierrors.NewTooManyRequests("the server has received too many requests", 1))
	var e struct {
		Error struct{ Code, Reason string } `json:"error"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &e)
	if rec.Code != http.StatusServiceUnavailable || e.Error.Code != codeNotReady || e.Error.Reason != NotReadyBusy {
		t.Errorf("a 429 of the kube-apiserver: %d %+v, want 503 not_ready, reason %q", rec.Code, e.Error, NotReadyBusy)
	}

	// 3. Not the elected manager (last: it changes the ledger).
	h.l.ready.Store(false)
	if r := reason(http.MethodGet, "/ledger/v1/namespaces/"+h.ns+"/balance", ""); r != NotReadyElecting {
		t.Errorf("a ledger that does not keep the books: reason %q, want %q", r, NotReadyElecting)
	}

	// 5. The read of an account the books do not have fails (a 500 of the kube-apiserver).
	failing := interceptor.NewClient(k8s, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*videogenv1alpha1.PointAccount); ok && key.Namespace == "unreadable" {
				return apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	l2 := h.startWith(h.ctx, "ledger-2", func(c *Config) { c.Reader = failing })
	srv2 := httptest.NewServer(Handler(l2))
	defer srv2.Close()
	srv.URL = srv2.URL
	if r := reason(http.MethodGet, "/ledger/v1/namespaces/unreadable/balance", ""); r != NotReadyBusy {
		t.Errorf("an account read that failed: reason %q, want %q", r, NotReadyBusy)
	}
}

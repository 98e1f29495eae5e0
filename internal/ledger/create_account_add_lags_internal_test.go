package ledger

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// A REST create (and a balance read) of an account whose PointAccount
// exists but whose informer Add has not reached the ledger yet is answered from the books
// alone: no books, so ErrAccountNotFound, which the REST apiserver answers 403
// account_not_found, "this API key's account has no points account; contact your
// administrator" (GET /v1/balance: 404). The kubectl path reads the account around the cache
// before it rejects a task for it (controllers: noAccount); the REST path did not.
//
// Interleaving (one manager): 1. the administrator creates a namespace, its PointAccount and an
// API key together (a GitOps sync, `kubectl apply -f tenant/`), and hands the key out; 2. the
// manager's PointAccount informer has not delivered the account's Add (a relist, a slow watch;
// or, for an account deleted and created again, the delete came and the Add lags); 3. the
// customer POSTs /v1/tasks (a free template, or after a top-up a PointTopUp controller applies
// once the books come) and reads GET /v1/balance. What the customer sees: a 403 told to call
// the administrator, and a 404, for an account that exists; no client retries either.
//
// Want: not_ready while the kube-apiserver shows the account (the REST ledger client retries it
// until the books come); account_not_found only once it confirms there is none (checked,
// holds below).
func TestARESTCreateOfAnAccountWhoseAddLagsIsNotRefusedAsNotFound(t *testing.T) {
	h := newHarness(t, 0)
	h.settle(h.l)

	ns := "t-" + string(uuid.NewUUID())[:8]
	must(t, k8s.Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	task := func(name string) *videogenv1alpha1.VideoTask {
		k := h.task(name)
		k.Namespace = ns
		return k
	}
	// Checked, holds: no account in the kube-apiserver either: account_not_found.
	if created, err := h.l.CreateTask(h.ctx, task("r0"), 0); !errors.Is(err, ErrAccountNotFound) {
		t.Fatalf("a REST create in a namespace without an account: %v (created: %v), want ErrAccountNotFound", err, created != nil)
	}
	if _, err := h.l.Balance(h.ctx, ns); !errors.Is(err, ErrAccountNotFound) {
		t.Fatalf("the balance of a namespace without an account: %v, want ErrAccountNotFound", err)
	}

	// 1.–2. The account is created; its Add has not reached the ledger.
	must(t, k8s.Create(h.ctx, &videogenv1alpha1.PointAccount{ObjectMeta: objectMeta(ns, videogenv1alpha1.PointAccountName)}))
	// 3.
	created, err := h.l.CreateTask(h.ctx, task("r1"), 0)
	if errors.Is(err, ErrAccountNotFound) {
		t.Errorf("a REST create is refused 403 account_not_found (%v) for an account the kube-apiserver has", err)
	} else if err != nil && !errors.Is(err, ErrNotReady) {
		t.Errorf("a REST create of an account whose Add lags: %v (created: %v), want not_ready (retried)", err, created != nil)
	}
	if _, err := h.l.Balance(h.ctx, ns); errors.Is(err, ErrAccountNotFound) {
		t.Errorf("GET /v1/balance is 404 account_not_found (%v) for an account the kube-apiserver has", err)
	} else if !errors.Is(err, ErrNotReady) {
		t.Errorf("the balance of an account whose Add lags: %v, want not_ready (retried)", err)
	}
}

package main

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// /readyz says ready only once the kinds the REST API reads are in its cache. Interleaving: a
// rollout starts the apiserver sidecar; the kubelet asks /readyz (initialDelaySeconds 5) before
// any request came in. Before the fix the check was WaitForCacheSync alone, which waits only
// for the informers that exist, and none did: controller-runtime makes a kind's informer at
// its first read. So the check passed at once, vacuously ("ready once the caches have synced",
// docs/api.md), the pod joined the API Service and the old pod was let go, and then the first
// GET /v1/tasks, /v1/templates or task POST of each kind waited while its informer listed
// every VideoTask (or Template, ShortTemplate, PointAccount) of the cluster: on a busy
// cluster, seconds of stalled requests after every rollout, and a client that gave up in
// the meantime left a 500 in the log. Here the cache fails a read of a kind that has no
// informer (ReaderFailOnMissingInformer), so "ready with the kind not cached" shows as a
// failed read right after the check passed.
func TestReadyMeansTheAPIsKindsAreCached(t *testing.T) {
	env, cfg, direct, err := testenv.Start()
	if err != nil {
		t.Skipf("no control plane: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	// A key is checked against its namespace too (apikeys.Authenticator): that kind is cached.
	bg := context.Background()
	for _, ns := range []string{"videogen-system", "acme"} {
		if err := direct.Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	key, _, err := apikeys.Issue(bg, direct, "videogen-system", "acme", "readiness")
	if err != nil {
		t.Fatal(err)
	}
	opts := managerOptions("videogen-system", "0", "0")
	opts.Cache.ReaderFailOnMissingInformer = true
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t.Cleanup(func() { cancel(); <-done })
	ready, err := cachesSynced(ctx, mgr)
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- mgr.Start(ctx) }()
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return ready(httptest.NewRequest("GET", "/readyz", nil)) == nil, nil
	}); err != nil {
		t.Fatalf("never ready: %v", err)
	}
	for _, obj := range cachedKinds() {
		list, err := mgr.GetClient().GroupVersionKindFor(obj)
		if err != nil {
			t.Fatal(err)
		}
		list.Kind += "List"
		l, err := mgr.GetScheme().New(list)
		if err != nil {
			t.Fatal(err)
		}
		if err := mgr.GetClient().List(ctx, l.(client.ObjectList), client.InNamespace("videogen-system")); err != nil {
			t.Errorf("/readyz passed, yet %T is not in the cache: %v", obj, err)
		}
	}
	if _, err := (&apikeys.Authenticator{Reader: mgr.GetClient(), Namespace: "videogen-system"}).Authenticate(ctx, key); err != nil {
		t.Errorf("/readyz passed, yet a key could not be checked from the cache: %v", err)
	}
}

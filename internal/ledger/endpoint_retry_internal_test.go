package ledger

import (
	"context"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// The elected manager's Endpoint write: a transient error is retried, a permanent one returned.

// A transient error of the kube-apiserver while the elected manager points the ledger Service
// at itself is retried, not the end of the manager. Interleaving: a manager is elected and
// its Endpoint runnable reads the EndpointSlice videogen-ledger-elected; that read (or the
// write after it) fails with a 500 or a timeout, as it does while etcd changes leader or the
// kube-apiserver restarts (the same blip that often caused the failover). Before the fix
// Start returned the error; a runnable's error stops controller-runtime's manager, so the
// manager that had just won the Lease exited (status 1, "problem running manager"), released
// the Lease and threw away the ledger it was rebuilding: another failover, the REST API's task
// POSTs and balances 503 again for its length, and with one replica the pod restarted (and,
// with the blip lasting, went into CrashLoopBackOff). Each step is an ordinary apiserver error.
func TestEndpointRetriesATransientError(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	failures := 2
	flaky := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*discoveryv1.EndpointSlice); ok && failures > 0 {
				failures--
				if failures == 1 {
					return apierrors.NewInternalError(errEtcdLeaderChanged)
				}
				return apierrors.NewServerTimeout(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "get", 1)
			}
			return cl.Get(ctx, key, obj, opts...)
		},
	})
	e := &Endpoint{Client: flaky, Reader: flaky, Namespace: "videogen-system", Service: "videogen-ledger", PodIP: "10.0.0.7", Port: 8084}
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v: the elected manager would exit over a transient error", err)
	}
	got := &discoveryv1.EndpointSlice{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "videogen-system", Name: "videogen-ledger-elected"}, got); err != nil {
		t.Fatal(err)
	}
	if len(got.Endpoints) != 1 || got.Endpoints[0].Addresses[0] != "10.0.0.7" {
		t.Errorf("the EndpointSlice points at %v, want 10.0.0.7", got.Endpoints)
	}
}

// A refusal that no retry changes (no permission) still ends Start at once: the manager's log
// says what to fix instead of retrying in silence.
func TestEndpointReturnsAPermanentError(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	forbidden := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, key.Name, errEtcdLeaderChanged)
		},
	})
	e := &Endpoint{Client: forbidden, Reader: forbidden, Namespace: "videogen-system", Service: "videogen-ledger", PodIP: "10.0.0.7", Port: 8084}
	if err := e.Start(context.Background()); err == nil || !apierrors.IsForbidden(err) {
		t.Fatalf("Start: %v, want the Forbidden", err)
	}
}

var errEtcdLeaderChanged = etcdError("etcdserver: leader changed")

type etcdError string

func (e etcdError) Error() string { return string(e) }

package ledger

import (
	"context"
	"fmt"
	"math"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Endpoint points the ledger's Service at the elected manager: the REST apiserver replicas ask
// the Service (config/default/ledger_service.yaml), and each manager that is elected writes its
// own pod address into the Service's one EndpointSlice, replacing its predecessor's. A replica
// that reaches a manager no longer elected gets not_ready and asks again.
type Endpoint struct {
	// Client writes the EndpointSlice; Reader reads it (around any cache: one Get at election).
	Client client.Client
	Reader client.Reader
	// Namespace and Service name the ledger's Service (a Service without a selector).
	Namespace, Service string
	// PodIP is this manager's address; Port the ledger's port.
	PodIP string
	Port  int32
	// Recheck, if above 0, reads the EndpointSlice this often while this manager is elected and
	// points it here again when something else wrote it: a deposed manager's write that landed
	// after this one's, or a deletion by hand, would otherwise send every REST call to a manager
	// that answers not_ready until the next election. 0 writes it once.
	Recheck time.Duration
}

// NeedLeaderElection: only the elected manager points the Service at itself.
func (e *Endpoint) NeedLeaderElection() bool { return true }

// Start writes the EndpointSlice, then keeps it pointing here every Recheck until this manager
// is no longer elected (the next elected manager overwrites it). A transient error (a 500 or a timeout while etcd changes leader) is
// retried with a backoff until ctx ends: returned, it would stop the manager that has just
// been elected, and its ledger with it. A refusal no retry changes is returned at once.
func (e *Endpoint) Start(ctx context.Context) error {
	ip := net.ParseIP(e.PodIP)
	if ip == nil {
		return fmt.Errorf("the ledger's address %q is not an IP address", e.PodIP)
	}
	log := ctrllog.Log.WithName("ledger-endpoint")
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 5 * time.Second},
		func(ctx context.Context) (bool, error) {
			err := e.publish(ctx, ip)
			switch {
			case err == nil:
				return true, nil
			case requestRefused(err):
				return false, err
			}
			log.Error(err, "retrying", "service", e.Service, "namespace", e.Namespace)
			return false, nil
		})
	if err != nil && ctx.Err() != nil {
		// Stopped (no longer elected, or shutting down) before a write landed: nothing to report.
		return nil
	}
	if err != nil || e.Recheck <= 0 {
		return err
	}
	// A read every Recheck; a write only when the slice no longer points here. A failure is
	// logged and tried again at the next tick: the slice most likely still points here.
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := e.publish(ctx, ip); err != nil && ctx.Err() == nil {
			log.Error(err, "re-pointing the ledger Service at this manager", "service", e.Service, "namespace", e.Namespace)
		}
	}, e.Recheck)
	return nil
}

// publish reads the EndpointSlice and creates or updates it to point at this manager.
func (e *Endpoint) publish(ctx context.Context, ip net.IP) error {
	name := e.Service + "-elected"
	addrType := discoveryv1.AddressTypeIPv4
	if ip.To4() == nil {
		addrType = discoveryv1.AddressTypeIPv6
	}
	want := discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: e.Service,
			discoveryv1.LabelManagedBy:   "videogen-operator.videogen.dev",
		}},
		AddressType: addrType,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{e.PodIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("ledger"), Port: ptr.To(e.Port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	got := &discoveryv1.EndpointSlice{}
	err := e.Reader.Get(ctx, client.ObjectKeyFromObject(&want), got)
	switch {
	case apierrors.IsNotFound(err):
		if err := e.Client.Create(ctx, &want); err != nil {
			// AlreadyExists too: the slice created meanwhile may point elsewhere (a deposed
			// manager's create, landed late); the retry reads it and points it here.
			return fmt.Errorf("pointing the ledger Service at this manager: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading the ledger's EndpointSlice: %w", err)
	}
	if equality.Semantic.DeepEqual(got.Labels, want.Labels) && got.AddressType == want.AddressType &&
		equality.Semantic.DeepEqual(got.Endpoints, want.Endpoints) && equality.Semantic.DeepEqual(got.Ports, want.Ports) {
		return nil // it points here already
	}
	got.Labels, got.AddressType, got.Endpoints, got.Ports = want.Labels, want.AddressType, want.Endpoints, want.Ports
	if err := e.Client.Update(ctx, got); err != nil {
		return fmt.Errorf("pointing the ledger Service at this manager: %w", err)
	}
	return nil
}

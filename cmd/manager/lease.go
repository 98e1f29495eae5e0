package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"

	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// leaderElectionID names the Lease the manager replicas elect their leader with.
const leaderElectionID = "videogen-operator.videogen.dev"

// leaderLease is the Lease controller-runtime would elect with (same kind, name and namespace,
// so replicas of earlier versions contend on it too), made here so that this manager knows its
// own identity in it: the ledger reads the Lease to order two managers' fences
// (ledger.Config.Lease). The namespace is the pod's, as controller-runtime finds it, or
// fallback outside a cluster.
type leaderLease struct {
	// lock is the elector's. Only the elector uses it: a LeaseLock's Get keeps the copy it
	// read as the base of its next Update, so a read through it would let a paused elector's
	// renewal land over the manager elected meanwhile.
	lock resourcelock.Interface
	// leases reads the Lease for the ledger, with a client of its own.
	leases coordinationv1client.LeaseInterface
}

func leaderLock(cfg *rest.Config, fallback string) (*leaderLease, error) {
	ns := fallback
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		ns = strings.TrimSpace(string(b))
	}
	if ns == "" {
		return nil, fmt.Errorf("no namespace for the leader Lease: not in a cluster, and --webhook-secret-namespace is empty")
	}
	cs, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election"))
	if err != nil {
		return nil, err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, leaderElectionID, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: ledger.NewIdentity()})
	if err != nil {
		return nil, err
	}
	return &leaderLease{lock: lock, leases: cs.CoordinationV1().Leases(ns)}, nil
}

// term reads the Lease from the kube-apiserver: whether it names this manager its holder, and
// its count of holder changes (client-go's elector adds one each time another identity, or
// this one after a release, takes it).
func (l *leaderLease) term(ctx context.Context) (ledger.LeaseTerm, error) {
	lease, err := l.leases.Get(ctx, leaderElectionID, metav1.GetOptions{})
	if err != nil {
		return ledger.LeaseTerm{}, err
	}
	return ledger.LeaseTerm{
		Held:        ptr.Deref(lease.Spec.HolderIdentity, "") == l.lock.Identity(),
		Transitions: int64(ptr.Deref(lease.Spec.LeaseTransitions, 0)),
	}, nil
}

package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// leaderElectionID names the Lease the manager replicas elect their leader with.
const leaderElectionID = "videogen-operator.videogen.dev"

// leaderLock is the Lease controller-runtime would elect with (same kind, name and namespace,
// so replicas of earlier versions contend on it too), made here so that this manager knows its
// own identity in it: the ledger reads the Lease to order two managers' fences
// (ledger.Config.Elected). The namespace is the pod's, as controller-runtime finds it, or
// fallback outside a cluster.
func leaderLock(cfg *rest.Config, fallback string) (resourcelock.Interface, error) {
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
	return resourcelock.New(resourcelock.LeasesResourceLock, ns, leaderElectionID, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: ledger.NewIdentity()})
}

// term reads lock's Lease from the kube-apiserver: whether it names this manager its holder,
// and its count of holder changes (client-go's elector adds one each time another identity,
// or this one after a release, takes it).
func term(lock resourcelock.Interface) func(context.Context) (ledger.LeaseTerm, error) {
	return func(ctx context.Context) (ledger.LeaseTerm, error) {
		record, _, err := lock.Get(ctx)
		if err != nil {
			return ledger.LeaseTerm{}, err
		}
		return ledger.LeaseTerm{Held: record.HolderIdentity == lock.Identity(), Transitions: int64(record.LeaderTransitions)}, nil
	}
}

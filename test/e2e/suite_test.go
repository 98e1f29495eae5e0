// Package e2e drives the whole system from outside, as its users do: REST calls over real
// HTTP, kubectl-equivalent client calls, the videogenctl binary, webhook receivers. It runs
// against the local stack (real processes; in `make test`) or a kind cluster (make test-e2e-kind).
package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var (
	ctx     context.Context
	cancel  context.CancelFunc
	stopSys func()
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	RunSpecs(t, "End-to-end Suite")
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())
	sys, stopSys = startTarget(ctx)
})

var _ = AfterSuite(func() {
	if stopSys != nil {
		stopSys()
	}
	if cancel != nil {
		cancel()
	}
})

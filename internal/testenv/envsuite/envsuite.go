// Package envsuite is the one bootstrap of the Ginkgo suites that run against an envtest
// control plane: the same Eventually defaults, logger, control plane (testenv.Start) and
// teardown for each, so a fix to one reaches all. It is test support: no binary links it.
package envsuite

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// Env is what a suite's specs share: a context that ends with the suite, the control plane,
// its config (client-side rate limiting off) and a direct client.
type Env struct {
	Ctx    context.Context
	Env    *envtest.Environment
	Config *rest.Config
	Client client.Client
}

// Run runs the calling package's specs against one control plane, filling in e before the
// first spec and then calling setup (nil: nothing more) for the suite's own fixtures. The
// control plane stops after the last spec. Call it from the package's Test function; the
// package registers no BeforeSuite or AfterSuite of its own (Ginkgo allows one of each).
func Run(t *testing.T, description string, eventually time.Duration, e *Env, setup func()) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(eventually)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	var cancel context.CancelFunc = func() {}
	BeforeSuite(func() {
		logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
		e.Ctx, cancel = context.WithCancel(context.Background())
		var err error
		e.Env, e.Config, e.Client, err = testenv.Start()
		Expect(err).NotTo(HaveOccurred())
		if setup != nil {
			setup()
		}
	})
	AfterSuite(func() {
		cancel()
		if e.Env != nil {
			Expect(e.Env.Stop()).To(Succeed())
		}
	})
	RunSpecs(t, description)
}

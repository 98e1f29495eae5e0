package controllers_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

var _ = Describe("A manager whose ledger another manager fenced", func() {
	It("stops with ErrFenced instead of running on, healthy and deciding nothing", func() {
		ns := suite.NewAccount(0)
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
			Cache:      cache.Options{ByObject: controllers.CacheByObject()},
			Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		})
		Expect(err).NotTo(HaveOccurred())
		l, err := controllers.Setup(mgr, testOptions(testbackend.New()))
		Expect(err).NotTo(HaveOccurred())
		mctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stopped := make(chan error, 1)
		go func() { stopped <- mgr.Start(mctx) }()
		Eventually(l.Ready, time.Minute).Should(BeTrue())

		// Another manager's fence write: its name in the account's status.authority.
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			acct := suite.AccountOf(ns)
			acct.Status.Authority = "another-manager"
			return k8sClient.Status().Update(ctx, acct)
		})).To(Succeed())

		var stop error
		Eventually(stopped, time.Minute).Should(Receive(&stop), "the fenced manager keeps running")
		Expect(stop).To(MatchError(ledger.ErrFenced))
	})
})

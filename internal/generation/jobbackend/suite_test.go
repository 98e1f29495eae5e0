package jobbackend_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

var (
	suite     envsuite.Env
	env       *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	ctx       context.Context
)

// There is no kubelet and no Job controller here: the specs write Job and Pod status themselves.
func TestJobBackend(t *testing.T) {
	envsuite.Run(t, "Job Backend Suite (envtest)", 10*time.Second, &suite, func() {
		ctx, env, cfg, k8sClient = suite.Ctx, suite.Env, suite.Config, suite.Client
	})
}

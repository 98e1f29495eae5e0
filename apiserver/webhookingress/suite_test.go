package webhookingress_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func TestWebhookIngress(t *testing.T) {
	envsuite.Run(t, "Webhook Ingress Suite (envtest)", 20*time.Second, &suite, func() {
		ctx, env, cfg, k8sClient = suite.Ctx, suite.Env, suite.Config, suite.Client
	})
}

// newNamespace creates a namespace of its own for one spec.
func newNamespace(prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

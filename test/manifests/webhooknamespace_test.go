package manifests

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// With apiserver.webhookNamespace elsewhere, connector Secrets and PaymentEvents live there,
// and a RoleBinding cannot name a Role of another namespace: platform administrators had no
// role to bind there for `videogenctl connectors --key-namespace` and `kubectl get
// paymentevents`. The chart renders videogen-platform-admin-keys there too, with the same
// rules as in the release namespace.
func TestPlatformAdminKeysRoleFollowsTheWebhookNamespace(t *testing.T) {
	objs := byKey(t, renderChart(t, "videogen-system", "apiserver.webhookNamespace=payments"))
	release, ok := objs["Role videogen-system/videogen-platform-admin-keys"]
	if !ok {
		t.Fatal("no Role videogen-platform-admin-keys in the release namespace")
	}
	webhooks, ok := objs["Role payments/videogen-platform-admin-keys"]
	if !ok {
		t.Fatal("no Role videogen-platform-admin-keys in the webhook namespace payments: administrators have nothing to bind there")
	}
	if diff := cmp.Diff(release["rules"], webhooks["rules"]); diff != "" {
		t.Errorf("the webhook namespace's videogen-platform-admin-keys differs from the release namespace's (-release +payments):\n%s", diff)
	}
}

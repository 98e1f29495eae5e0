package controllers

import (
	"context"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/outbound"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// A completion webhook to an IPv6 literal written with a zone, in a range only
// netguard's nonPublic list refuses (NAT64 64:ff9b::/96, 6to4, IPv4-compatible, SIIT,
// site-local), was sent: the zone hid the address from the list (netip.Prefix.Contains is
// false for a zoned address), at the REST API's check and at the dialer's alike, and Linux
// ignores the scope id of an address that is not link-local. (internal/netguard's
// TestAZonedNonPublicAddressIsRefused is the root.)
//
// Reachable: POST /v1/videos/… {"webhook_url":"http://[64:ff9b::a9fe:a9fe%251]/latest/meta-data/"}
// (202 before the fix), or any tenant with kubectl create on VideoTasks. When the task ends, the
// manager POSTs the signed task object to 64:ff9b::a9fe:a9fe, which a cluster with NAT64 (IPv6-only
// nodes) translates to 169.254.169.254, the cloud metadata service: the SSRF docs/api.md says
// never happens ("NAT64, 6to4 and other non-public addresses, in any notation, are refused").
// Before the fix the attempt dialled (here: no route, a Retry and the task open for a day).
//
// Want: refused as the literal it is, before any connection: Stopped at attempt 1, the task closed.
func TestWebhookToAZonedNonPublicLiteralStopsAtOnce(t *testing.T) {
	for _, url := range []string{"http://[64:ff9b::a9fe:a9fe%251]/latest/meta-data/", "http://[2002:a9fe:a9fe::1%25eth0]/hook"} {
		t.Run(url, func(t *testing.T) {
			now := time.Now().Truncate(time.Second)
			task := finishedTaskWithWebhook(now, url, 0)
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(task, accountNamespace(task.Namespace)).WithStatusSubresource(task).Build()
			r := newWebhookReconciler(c, now)
			r.Config.Client = outbound.NewGuardedClient(netguard.Policy{}, 500*time.Millisecond)
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)}
			if _, err := r.Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			got := &videogenv1alpha1.VideoTask{}
			if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
				t.Fatal(err)
			}
			if w := got.Status.Webhook; w == nil || w.State != videogenv1alpha1.WebhookStopped || w.Attempts != 1 || !got.Status.Closed {
				t.Fatalf("webhook %+v closed %v, want Stopped at attempt 1 and the task closed", got.Status.Webhook, got.Status.Closed)
			}
		})
	}
}

package apiserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// A suspension the replica's informer has not delivered yet still stops template creates and
// changes: an administrator's `kubectl patch pointaccount … suspended: true` has returned, so
// the kube-apiserver, not the cache, decides (tasks are refused by the ledger, which reads its
// own books; templates were refused from the cache alone, for as long as the watch lagged).
func TestASuspensionTheCacheHasNotSeenYetStopsTemplateWrites(t *testing.T) {
	open := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: videogenv1alpha1.PointAccountName}}
	suspended := open.DeepCopy()
	suspended.Spec.Suspended = true
	mine := &videogenv1alpha1.ShortTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: "ushort-mine",
		Labels: map[string]string{videogenv1alpha1.LabelShortTemplateID: "ushort_mine"}},
		Spec: videogenv1alpha1.ShortTemplateSpec{DisplayName: "Mine", TargetURL: "https://cdn.example/mine.mp4"}}
	srv, _ := laggingReplica(t, []client.Object{open, mine.DeepCopy()}, []client.Object{suspended, mine.DeepCopy()})

	post := httptest.NewRequest(http.MethodPost, "/v1/short-templates",
		strings.NewReader(`{"name":"Promo","target_url":"https://cdn.example/promo.mp4"}`))
	post.Header.Set("Content-Type", "application/json")
	if rec := serveAs(srv.createShortTemplate, "acct", post); rec.Code != http.StatusForbidden {
		t.Errorf("create after the suspension returned: %d %s, want 403 account_suspended", rec.Code, rec.Body)
	} else if code, _ := errorOf(t, rec); code != "account_suspended" {
		t.Errorf("create after the suspension returned: %s, want account_suspended", code)
	}

	patch := httptest.NewRequest(http.MethodPatch, "/v1/short-templates/ushort_mine",
		strings.NewReader(`{"name":"Renamed"}`))
	patch.Header.Set("Content-Type", "application/json")
	patch.SetPathValue("id", "ushort_mine")
	if rec := serveAs(srv.patchShortTemplate, "acct", patch); rec.Code != http.StatusForbidden {
		t.Errorf("change after the suspension returned: %d %s, want 403 account_suspended", rec.Code, rec.Body)
	}
}

package ledger

import (
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// The admission annotation's signature covers no UID (there is none before the create), so
// config/policies/videotask_admission.yaml keeps it to those who may write task statuses. Without
// the policy a tenant replays a REST admission: they delete a task the ledger made for them at 30,
// create its twin with kubectl (same name, spec and annotation, all of which they can read), and
// the ledger counts it at the signed 30, whatever the template costs now, as often as they like.
// Nor may they add the annotation to a task of theirs, or take it off one the ledger made; other
// edits of such a task (a cancel request) still go through.
func TestOnlyTheLedgerSetsAnAdmission(t *testing.T) {
	h := newHarness(t, 100)
	tenant := h.tenantClient("ann")

	made := h.create(h.l, "rest", 30)
	twin := h.task("rest")
	twin.Annotations = map[string]string{videogenv1alpha1.AnnotationAdmission: made.Annotations[videogenv1alpha1.AnnotationAdmission]}
	if _, ok := h.l.cfg.Signer.Admitted(twin); !ok {
		t.Fatal("the twin's copied annotation does not verify: the test would prove nothing")
	}
	must(t, tenant.Delete(h.ctx, made))
	refused(t, "the twin of a deleted REST task", tenant.Create(h.ctx, twin))

	mine := h.task("mine")
	must(t, tenant.Create(h.ctx, mine))
	mine.Annotations = map[string]string{videogenv1alpha1.AnnotationAdmission: "1:forged"}
	refused(t, "adding an admission", tenant.Update(h.ctx, mine))

	other := h.create(h.l, "other", 30)
	cancel := other.DeepCopy()
	cancel.Annotations[videogenv1alpha1.AnnotationCancelRequested] = "true"
	must(t, tenant.Patch(h.ctx, cancel, client.MergeFrom(other)))
	strip := cancel.DeepCopy()
	delete(strip.Annotations, videogenv1alpha1.AnnotationAdmission)
	refused(t, "removing an admission", tenant.Update(h.ctx, strip))
}

func refused(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "videogen.dev/admission") {
		t.Errorf("%s by a tenant: %v, want refused by the admission policy", what, err)
	}
}

// tenantClient is a client acting as user, who may do to VideoTasks in the harness's namespace
// what videogen-edit and videogen-view allow (config/rbac/tenant_*_role.yaml).
func (h *harness) tenantClient(user string) client.Client {
	h.t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "tenant"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{videogenv1alpha1.GroupVersion.Group}, Resources: []string{"videotasks"},
			Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "tenant"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"}}
	must(h.t, k8s.Create(h.ctx, role))
	must(h.t, k8s.Create(h.ctx, binding))
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	must(h.t, err)
	// The authorizer sees the binding through its informer: wait until the tenant may list.
	for i := 0; ; i++ {
		err := c.List(h.ctx, &videogenv1alpha1.VideoTaskList{}, client.InNamespace(h.ns))
		if err == nil {
			return c
		}
		if i == 100 {
			h.t.Fatalf("the tenant's role never took effect: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// videogen.dev/face-image-uploaded tells the backend that a task's faceImageURL is the service's
// own copy of a face sent inline, which the worker may fetch from the service's network
// (--allow-private-service-media). So the policy keeps it, too, to those who may write task
// statuses: a tenant who marked a task of theirs would make the worker fetch any faceImageURL,
// a cluster Service's address included. Other edits of a marked task still go through.
func TestOnlyTheLedgerMarksAFaceUploaded(t *testing.T) {
	h := newHarness(t, 100)
	tenant := h.tenantClient("up")
	uploaded := map[string]string{videogenv1alpha1.AnnotationFaceImageUploaded: "true"}

	marked := h.task("marked")
	marked.Annotations = uploaded
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "videogen.dev/face-image-uploaded") {
			t.Errorf("%s by a tenant: %v, want refused by the admission policy", what, err)
		}
	}
	refused("a task created marked", tenant.Create(h.ctx, marked))

	mine := h.task("mine")
	must(t, tenant.Create(h.ctx, mine))
	mine.Annotations = uploaded
	refused("marking a task", tenant.Update(h.ctx, mine))

	ledgers := h.task("ledgers")
	ledgers.Annotations = map[string]string{videogenv1alpha1.AnnotationFaceImageUploaded: "true"}
	must(t, k8s.Create(h.ctx, ledgers)) // as the manager, which may write statuses
	cancel := ledgers.DeepCopy()
	cancel.Annotations[videogenv1alpha1.AnnotationCancelRequested] = "true"
	must(t, tenant.Patch(h.ctx, cancel, client.MergeFrom(ledgers)))
	unmark := cancel.DeepCopy()
	delete(unmark.Annotations, videogenv1alpha1.AnnotationFaceImageUploaded)
	refused("unmarking a task", tenant.Update(h.ctx, unmark))
}

package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
)

// A face is the service's own copy (fetched from
// --allow-private-service-media) only on a task the ledger made for the REST API, which always
// carries the ledger's signed admission record; the face-image-uploaded annotation alone is not
// proof of it.
//
// Interleaving: until this release the annotation only kept a fetch failure from naming the
// URL, and nothing stopped a tenant from setting it (the policy that keeps it to status-writers
// is new in this release, b692d25). A tenant with videogen-edit creates, with kubectl, a task
//
//	annotations: {videogen.dev/face-image-uploaded: "true"}
//	spec.inputs.faceImageURL: http://<a Service of the cluster>/<anything>
//
// (1) before the upgrade lands, or in the seconds of `helm upgrade` in which the kube-apiserver
// has not yet loaded the new policy while the new manager and worker start: the old policy lets
// it in, and it stays marked (the new policy only refuses changes of the mark); or (2) days
// before, on a task that is still running at the upgrade: the worker restarts with it (stage
// state lives in its memory), the controller submits the lost stage again, to the new worker.
// Either way the new manager tells the new worker face_image_uploaded, and the worker fetches
// the tenant's URL with the service fetcher, from the Service CIDR the release meant to close
// (a blind SSRF, the one 2bdd4bb fixes). A kubectl task never carries the ledger's admission
// annotation (signed by the ledger, kept to status-writers by the policy since e2bcd5c, before
// the face mark existed), and every REST task does (ledger.CreateTask signs every create).
func TestAFaceIsTheServicesOnlyOnATaskTheLedgerMade(t *testing.T) {
	r := &VideoTaskReconciler{}
	marked := map[string]string{videogenv1alpha1.AnnotationFaceImageUploaded: "true"}
	byLedger := map[string]string{videogenv1alpha1.AnnotationFaceImageUploaded: "true",
		videogenv1alpha1.AnnotationAdmission: "5:c2lnbmVk"}
	for _, c := range []struct {
		name        string
		annotations map[string]string
		face        string
		want        bool
	}{
		{"a REST task whose face was sent inline", byLedger, "http://videogen-api.videogen-system.svc/v1/blobs/x.png", true},
		{"a kubectl task marked before the policy kept the mark", marked, "http://10.96.0.10/internal", false},
	} {
		task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: "vt", UID: "u", Annotations: c.annotations}}
		task.Spec.Inputs.FaceImageURL = c.face
		for _, stage := range videogenv1alpha1.Stages {
			if got := r.work(task, catalog.Template{ID: "beach"}, stage).FaceImageUploaded; got != c.want {
				t.Errorf("%s, %s: FaceImageUploaded = %v, want %v", c.name, stage, got, c.want)
			}
		}
	}
}

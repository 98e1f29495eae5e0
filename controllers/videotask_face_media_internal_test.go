package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// The backend is told when the face is the service's copy of one sent inline (so that a failure
// to read it back does not show the caller a URL of the service's storage), and only then may it
// fetch it from --allow-private-service-media. A face is the service's own copy only on a task
// the ledger made for the REST API, which always
// carries the ledger's signed admission record; the face-image-uploaded annotation alone is not
// proof of it.
//
// The signature, not the annotation's presence, is the proof: where the admission policies are
// off, a tenant can write any annotation (the forged-record case below).
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
	signer, err := ledger.NewSigner([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	r := &VideoTaskReconciler{Ledger: ledger.New(ledger.Config{Signer: signer})}
	const service = "http://videogen-api.videogen-system.svc/v1/blobs/x.png"
	aTask := func(face string, annotations map[string]string) *videogenv1alpha1.VideoTask {
		task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: "vt", UID: "u", Annotations: annotations}}
		task.Spec.Inputs.FaceImageURL = face
		return task
	}
	signed := func(face string, mark bool) *videogenv1alpha1.VideoTask {
		task := aTask(face, map[string]string{})
		if mark {
			task.Annotations[videogenv1alpha1.AnnotationFaceImageUploaded] = "true"
		}
		signer.Sign(task, 5)
		return task
	}
	// Signed for the service's URL, then given a tenant's (spec edits are refused by the CRD,
	// but the signature must not depend on that).
	swapped := signed(service, true)
	swapped.Spec.Inputs.FaceImageURL = "http://10.96.0.10/internal"
	for _, c := range []struct {
		name string
		task *videogenv1alpha1.VideoTask
		want bool
	}{
		{"a REST task whose face was sent inline", signed(service, true), true},
		{"a REST task whose face the caller gave by URL", signed("https://media.example/face.jpg", false), false},
		{"a REST task marked, but without a face", signed("", true), false},
		{"a kubectl task marked before the policy kept the mark", aTask("http://10.96.0.10/internal",
			map[string]string{videogenv1alpha1.AnnotationFaceImageUploaded: "true"}), false},
		// Found by a tenant's tour with the admission policies off: any admission annotation
		// was taken as the ledger's, so a forged one made the worker fetch the tenant's URL from
		// the Service CIDR. Failed before the fix: FaceImageUploaded = true.
		{"a kubectl task with a forged admission record", aTask("http://10.96.0.10/internal",
			map[string]string{videogenv1alpha1.AnnotationFaceImageUploaded: "true", videogenv1alpha1.AnnotationAdmission: "1:forged"}), false},
		{"a signed task whose face URL changed since", swapped, false},
	} {
		for _, stage := range videogenv1alpha1.Stages {
			if got := r.work(c.task, catalog.Template{ID: "beach"}, stage).FaceImageUploaded; got != c.want {
				t.Errorf("%s, %s: FaceImageUploaded = %v, want %v", c.name, stage, got, c.want)
			}
		}
	}
}

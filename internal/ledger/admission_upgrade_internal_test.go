package ledger

import (
	"encoding/base64"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// TestAdmissionOfAnOlderVersionVerifies pins the admission MAC across upgrades. The
// annotations below were written by the ledger of 8734bf8 (2026-11-25) on a local stack, with
// the signing key of its videogen-ledger-signing-key Secret. A task that version admitted but
// whose controller had not yet accepted it when the new manager took over is counted by this
// ledger only if Admitted still proves its price (evidence): a change to what the MAC covers,
// or to how VideoTaskSpec marshals a spec without the fields it adds, would leave such a task's
// hold uncounted during an upgrade (and its price then taken as a kubectl task's).
func TestAdmissionOfAnOlderVersionVerifies(t *testing.T) {
	key, err := base64.StdEncoding.DecodeString("8l0tou2bem9ggqu+PtUKzQwSwL4+iZlwotvPvkqS6Gw=")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		namespace, name, admission string
		price                      int64
		spec                       videogenv1alpha1.VideoTaskSpec
	}{
		{"demo", "vt-chnre2q7zuxbbrxc6drg326z", "30:Jf7Eg-zfyw7LMPWgzY-rz-23oriHWIwu48oUa45uFrU", 30,
			videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityShort, TemplateRef: "demo-portrait",
				Inputs: videogenv1alpha1.TaskInputs{FaceImageURL: "http://127.0.0.1:8390/v1/blobs/a13976ff7481a7c6df53dab8e96245d9.jpg"}}},
		{"acme", "vt-bayz243euofpxso66p5f7u3i", "35:OV1l-iJd_Sau3ONU-_W5qq7wQR2QRIysk4M49_g-Lng", 35,
			videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityTemplate, TemplateRef: "demo-countdown",
				Duration: ptr.To[int32](10)}},
		{"acme", "vt-cbmr2d3phj2c2ddecbgn6n7i", "20:Okneg66mdFIARIYPyzfNkidtMYArJP4ynNhN-ofRkwI", 20,
			videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityTemplate, TemplateRef: "demo-countdown",
				Duration: ptr.To[int32](5), WebhookURL: "http://127.0.0.1:8399/hook"}},
		{"demo", "vt-z3ol2xjhlmbbeijmcvdrn24u", "10:H609gS1AV33W483SJyJGsePzkaFD4Lu4oGaa-Z2edBU", 10,
			videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
				Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "http://127.0.0.1:8390/v1/blobs/8ef5e7e8348da325f029fcaca3e59e3f.mp4"}}},
	} {
		task := &videogenv1alpha1.VideoTask{
			ObjectMeta: metav1.ObjectMeta{Namespace: tc.namespace, Name: tc.name,
				Annotations: map[string]string{videogenv1alpha1.AnnotationAdmission: tc.admission}},
			Spec: tc.spec,
		}
		if p, ok := signer.Admitted(task); !ok || p != tc.price {
			t.Errorf("%s/%s: Admitted = %d, %v; want %d, true (the admission 8734bf8 signed no longer verifies)",
				tc.namespace, tc.name, p, ok, tc.price)
		}
	}
}

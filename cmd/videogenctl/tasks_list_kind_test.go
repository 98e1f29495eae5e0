package main

import (
	"bytes"
	"io"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Checked, holds: task list -o jsonpath='{.items[*].kind}' prints the items' kind, as kubectl's
// does. Suspected by an earlier review: a script that handles several kinds runs `videogenctl task list
// -n acme -o jsonpath='{range .items[*]}{.kind}/{.metadata.name}{"\n"}{end}'`, and the items
// of a typed list carry no kind. They do here: VideoTask is a CRD, and the kube-apiserver
// serves a custom resource's list with each item's apiVersion and kind, which the typed
// client keeps. A pin against a client that strips them (a cache read, a conversion through the scheme).
func TestTaskListItemsCarryTheirKind(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	mustCreateNamespace(t, ctx, c, "acme")
	for _, name := range []string{"vt-1", "vt-2"} {
		if err := c.Create(ctx, &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: name},
			Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
				Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	for format, want := range map[string]string{
		`jsonpath={.items[*].kind}`: "VideoTask VideoTask",
		`jsonpath={range .items[*]}{.apiVersion}/{.kind}/{.metadata.name} {end}`: "videogen.dev/v1alpha1/VideoTask/vt-2 videogen.dev/v1alpha1/VideoTask/vt-1 ",
		`go-template={{range .items}}{{.kind}} {{end}}`:                          "VideoTask VideoTask ",
		`jsonpath={.kind}`: "VideoTaskList",
	} {
		var out bytes.Buffer
		if err := run(ctx, []string{"task", "list", "-n", "acme", "-o", format, "--kubeconfig", kubeconfig}, &out); err != nil || out.String() != want {
			t.Errorf("task list -o %s printed %q, %v; want %q", format, out.String(), err, want)
		}
	}
}

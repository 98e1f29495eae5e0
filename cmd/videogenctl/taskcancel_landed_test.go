package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// task cancel whose patch landed but answered an error says the cancel was asked for. Before,
// the kube-apiserver's 504 ("Timeout: request did not complete within requested timeout", etcd
// slow) or a connection dropped after the request was sent made it print "canceling task vt-1:
// Timeout: …" and exit 1, though the annotation was on the task and the task was being
// canceled. Now it reads the task: the annotation there, the cancel is reported as requested;
// not there, it says the cancel may have been recorded and how to see it or ask again.
func TestTaskCancelWhosePatchLandedButFailedIsReported(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	mustCreateNamespace(t, ctx, c, "acme")
	for _, name := range []string{"vt-landed", "vt-lost"} {
		task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: name},
			Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
				Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}
		if err := c.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
		cost := int64(10)
		task.Status = videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskRunning, Progress: 40, Cost: &cost, Charge: videogenv1alpha1.ChargeFrozen}
		if err := c.Status().Update(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	var forward atomic.Bool
	flags := methodLandsThen504(t, env, http.MethodPatch, "/namespaces/acme/videotasks/vt-landed", &forward)
	forward.Store(true)
	var out bytes.Buffer
	err := run(ctx, append([]string{"task", "cancel", "vt-landed", "-n", "acme"}, flags...), &out)
	if err != nil || !strings.Contains(out.String(), "cancel requested for task vt-landed") {
		t.Errorf("task cancel whose patch landed and answered 504: %v\n%s; want \"cancel requested for task vt-landed\"", err, out.String())
	}

	flags = methodLandsThen504(t, env, http.MethodPatch, "/namespaces/acme/videotasks/vt-lost", &atomic.Bool{})
	out.Reset()
	err = run(ctx, append([]string{"task", "cancel", "vt-lost", "-n", "acme"}, flags...), &out)
	if err == nil || !strings.Contains(err.Error(), "may have been recorded all the same") || !strings.Contains(err.Error(), "task get vt-lost -n acme") {
		t.Errorf("task cancel whose patch answered 504 and did not land: %v\n%s; want it said that the cancel may have been recorded, and how to see it", err, out.String())
	}
	lost := &videogenv1alpha1.VideoTask{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "vt-lost"}, lost); err != nil {
		t.Fatal(err)
	}
	if _, asked := lost.Annotations[videogenv1alpha1.AnnotationCancelRequested]; asked {
		t.Errorf("vt-lost carries the cancel annotation, though its patch never reached the kube-apiserver")
	}
}

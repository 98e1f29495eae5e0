package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// task list says when --limit left tasks out. Before, `task list -n acme` of an account with 73
// tasks printed the 50 newest and nothing else: an administrator counting an account's tasks,
// or looking for an older one that holds points, read the listing as all of them. Now a note on
// stderr (as account show's "(N older: …)", and kubectl's notes, out of a script's -o output)
// says how many older tasks it left out and that --limit 0 lists them all; a listing that shows
// every task says nothing more.
func TestTaskListSaysWhatLimitLeftOut(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	var notes bytes.Buffer
	stderr = &notes
	t.Cleanup(func() { stderr = os.Stderr })
	mustCreateNamespace(t, ctx, c, "acme")
	for _, name := range []string{"vt-1", "vt-2", "vt-3"} {
		if err := c.Create(ctx, &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: name},
			Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
				Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	for _, format := range []string{"table", "name", "json"} {
		notes.Reset()
		if err := run(ctx, []string{"task", "list", "-n", "acme", "--limit", "2", "-o", format, "--kubeconfig", kubeconfig}, io.Discard); err != nil ||
			!strings.Contains(notes.String(), "1 older task not shown") || !strings.Contains(notes.String(), "--limit 0") {
			t.Errorf("task list --limit 2 -o %s of 3 tasks: %v, stderr %q; want it said that 1 older task is not shown, and --limit 0", format, err, notes.String())
		}
		notes.Reset()
		if err := run(ctx, []string{"task", "list", "-n", "acme", "--limit", "3", "-o", format, "--kubeconfig", kubeconfig}, io.Discard); err != nil || notes.Len() != 0 {
			t.Errorf("task list --limit 3 -o %s of 3 tasks: %v, stderr %q; want nothing on stderr", format, err, notes.String())
		}
	}
}

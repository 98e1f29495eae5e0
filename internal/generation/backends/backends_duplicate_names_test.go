package backends

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// Input: a backends config with two entries of
// the same name (a copy-pasted entry whose name was not changed), e.g. "worker" at url A for
// video.short and "worker" at url B for video.eraser. It loaded: stages record their backend
// by name (stages[].backend) and the controller finds the backend a stage ran at by that name
// (generation.Routes.Named), which then returns either entry, by Go's map order, differently
// from one reconcile to the next. A render recorded at worker/A after video.short moved to
// worker/B is looked for (finishedAt), stopped (reroute, timeout, deletion) at whichever entry
// Named returns: at B it is not the server that issued the handle, so the finished render is
// not taken and the running one not stopped (it runs on, unpaid), at random. Events and the
// backend metrics name both as one. The fix: a config whose names are not unique is refused at
// load, saying which name, as a capability served twice is. Failed before the fix with Load
// succeeding.
func TestLoadRefusesTwoBackendsOfOneName(t *testing.T) {
	dir := t.TempDir()
	cfg := write(t, dir, "backends.yaml", `
backends:
- name: worker
  capabilities: [video.short]
  http:
    url: http://worker-a.example:8080
- name: worker
  capabilities: [video.eraser]
  http:
    url: http://worker-b.example:8080
`)
	routes, err := Load(cfg, fake.NewClientBuilder().Build())
	if err == nil {
		servers := map[string]bool{}
		for range 50 {
			if b, ok := routes.Named("worker"); ok {
				servers[generation.ServerOf(b)] = true
			}
		}
		t.Fatalf("two backends named worker loaded; Named(worker) gave %d servers over 50 calls", len(servers))
	}
	if !strings.Contains(err.Error(), `"worker"`) {
		t.Errorf("error %q does not name the backend", err)
	}
}

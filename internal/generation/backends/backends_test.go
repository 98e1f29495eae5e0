package backends

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/videogen-dev/videogen-operator/internal/generation"
)

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadRoutesEachCapabilityToOneBackend(t *testing.T) {
	dir := t.TempDir()
	token := write(t, dir, "token", "s3cret\n")
	jobs := write(t, dir, "jobs.yaml", `
capabilities:
  video.short:
    template:
      spec:
        containers:
        - name: faceswap
          image: example.com/faceswap:1.0
`)
	cfg := write(t, dir, "backends.yaml", `
backends:
- name: worker
  capabilities: [video.eraser, video.template, image.pose]
  http:
    url: http://worker.example:8080
    tokenFile: `+token+`
    requestTimeout: 5s
- name: gpu
  capabilities: [video.short]
  job:
    configFile: `+jobs+`
`)
	// Building a Job backend needs a client; nothing is sent through it here.
	routes, err := Load(cfg, fake.NewClientBuilder().Build())
	if err != nil {
		t.Fatal(err)
	}
	for c, want := range map[string]string{"video.short": "gpu", "video.eraser": "worker", "video.template": "worker", "image.pose": "worker"} {
		name, _, ok := routes.Route(capabilityOf(c))
		if !ok || name != want {
			t.Errorf("%s routed to %q (ok=%v), want %q", c, name, ok, want)
		}
	}
}

// Checked, holds: the backends the manager routes to say which server they talk to
// (stages[].server), as loaded from the file: an http backend its url, a Job backend "job" (its
// kind, so that an http backend configured under its name later is another server). A
// backend wrapped in something that does not say would record no server, and a url changed
// under the same name would be taken for the same server again.
func TestLoadedBackendsSayTheirServer(t *testing.T) {
	dir := t.TempDir()
	jobs := write(t, dir, "jobs.yaml", `
capabilities:
  video.short:
    template:
      spec:
        containers:
        - name: faceswap
          image: example.com/faceswap:1.0
`)
	cfg := write(t, dir, "backends.yaml", `
backends:
- name: worker
  capabilities: [video.eraser]
  http:
    url: http://worker.example:8080/
- name: gpu
  capabilities: [video.short]
  job:
    configFile: `+jobs+`
`)
	routes, err := Load(cfg, fake.NewClientBuilder().Build())
	if err != nil {
		t.Fatal(err)
	}
	for c, want := range map[string]string{"video.eraser": "http://worker.example:8080", "video.short": "job"} {
		_, b, _ := routes.Route(capabilityOf(c))
		if got := generation.ServerOf(b); got != want {
			t.Errorf("%s: server %q, want %q", c, got, want)
		}
	}
}

func TestLoadRefusesBadConfigs(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"served twice": `
backends:
- {name: a, capabilities: [video.short], http: {url: "http://a"}}
- {name: b, capabilities: [video.short], http: {url: "http://b"}}`,
		"unknown capability": `backends: [{name: a, capabilities: [video.long], http: {url: "http://a"}}]`,
		"no kind":            `backends: [{name: a, capabilities: [video.short]}]`,
		"two kinds":          `backends: [{name: a, capabilities: [video.short], http: {url: "http://a"}, job: {configFile: x}}]`,
		"no name":            `backends: [{capabilities: [video.short], http: {url: "http://a"}}]`,
		"relative url":       `backends: [{name: a, capabilities: [video.short], http: {url: "worker:8080"}}]`,
		"unknown field":      `backends: [{name: a, capabilites: [video.short], http: {url: "http://a"}}]`,
		"missing job config": `backends: [{name: a, capabilities: [video.short], job: {configFile: /nonexistent.yaml}}]`,
		"bad duration":       `backends: [{name: a, capabilities: [video.short], http: {url: "http://a", requestTimeout: soon}}]`,
	}
	for name, content := range cases {
		p := write(t, dir, strings.ReplaceAll(name, " ", "-")+".yaml", content)
		if _, err := Load(p, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

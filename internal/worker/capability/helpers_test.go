package capability

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/worker/face"
	"github.com/videogen-dev/videogen-operator/internal/worker/fetcher"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
)

// rig serves test media over HTTP from media/ and stores results in blobs/.
type rig struct {
	t     *testing.T
	media string
	blobs *blobstore.Dir
	url   string
	p     *Pipelines
	// progress is what the last run reported, in order.
	progress []int
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{t: t, media: t.TempDir(), blobs: &blobstore.Dir{Root: t.TempDir()}}
	mux := http.NewServeMux()
	mux.Handle("/media/", http.StripPrefix("/media/", http.FileServer(http.Dir(r.media))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.url = srv.URL
	r.blobs.BaseURL = srv.URL + "/blobs/"
	loopback := netguard.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	r.p = New(Deps{
		Fetcher: fetcher.New(loopback, 50<<20, 30*time.Second),
		Store:   r.blobs,
		Faces:   face.CLI{},
		TempDir: t.TempDir(),
	})
	return r
}

// serve publishes a file made in the media directory and returns its URL.
func (r *rig) serve(file string) string {
	rel, err := filepath.Rel(r.media, file)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.url + "/media/" + filepath.ToSlash(rel)
}

// run prepares and runs one stage to its end.
func (r *rig) run(req protocol.StageRequest) (jobs.Outcome, error) {
	r.t.Helper()
	fn, err := r.p.Prepare(req)
	if err != nil {
		return jobs.Outcome{}, err
	}
	r.progress = nil
	return fn(context.Background(), func(p int, _ string) { r.progress = append(r.progress, p) })
}

// checkProgress fails the test unless the last run reported progress that only goes up, stays
// within [0, 100], and says something between its start and its end.
func (r *rig) checkProgress(stage string) {
	r.t.Helper()
	between := 0
	for i, p := range r.progress {
		if p < 0 || p > 100 || i > 0 && p < r.progress[i-1] {
			r.t.Fatalf("%s progress %v: want values in [0, 100] that never go down", stage, r.progress)
		}
		if p > 0 && p < 100 {
			between++
		}
	}
	if between == 0 {
		r.t.Errorf("%s reported no progress between start and end: %v", stage, r.progress)
	}
}

// mustRun is run that fails the test on error.
func (r *rig) mustRun(req protocol.StageRequest) jobs.Outcome {
	r.t.Helper()
	out, err := r.run(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", req.Capability, req.Stage, err)
	}
	return out
}

// resultFile is where the blob store keeps a result.
func (r *rig) resultFile(res *protocol.Result) string {
	r.t.Helper()
	if res == nil || res.URL == "" {
		r.t.Fatal("no result")
	}
	return filepath.Join(r.blobs.Root, path.Base(res.URL))
}

func analyzeThenRender(r *rig, req protocol.StageRequest) (analyze, render jobs.Outcome) {
	r.t.Helper()
	req.Stage, req.Key = "analyze", req.Key+"/analyze"
	analyze = r.mustRun(req)
	req.Stage, req.Key, req.Previous = "render", req.Key+"/render", analyze.Outputs
	return analyze, r.mustRun(req)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

package capability

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/worker/face"
	"github.com/videogen-dev/videogen-operator/internal/worker/fetcher"
	"github.com/videogen-dev/videogen-operator/internal/worker/testmedia"
)

// A face the caller sent inline is the service's own copy, at a URL of the service's storage
// the caller never saw: a failure to read it back says so without that URL (the worker's log
// keeps it). A face the caller gave by URL is named by that URL, as before.
func TestAnUploadedFaceThatCannotBeReadBackIsToldWithoutItsURL(t *testing.T) {
	r := newRig(t)
	gone := r.url + "/v1/blobs/" + strings.Repeat("ab", 32) + ".jpg" // 404: the rig serves no blobs there
	stage := func(uploaded bool) error {
		_, err := r.run(protocol.StageRequest{Key: "k", Capability: "video.short", Stage: "analyze",
			TemplateMediaURL: r.url + "/media/template.mp4",
			Inputs:           protocol.Inputs{FaceImageURL: gone, FaceImageUploaded: uploaded}})
		return err
	}

	err := stage(true)
	want := "the face image you uploaded could not be read back from the service's storage (HTTP 404)"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("uploaded face: err = %v, want it to start %q", err, want)
	}
	if host := strings.TrimPrefix(r.url, "http://"); strings.Contains(err.Error(), host) || strings.Contains(err.Error(), "/v1/blobs/") {
		t.Errorf("uploaded face: %q names the service's storage", err)
	}
	var detailed interface{ Detail() string }
	if !errors.As(err, &detailed) || !strings.Contains(detailed.Detail(), gone) {
		t.Errorf("uploaded face: %v keeps no detail with the URL for the log", err)
	}

	err = stage(false)
	if want := "the face image could not be fetched: fetching " + gone + ": HTTP 404"; err == nil || err.Error() != want {
		t.Errorf("face by URL: err = %v, want %q", err, want)
	}
}

// A template's media is its owner's: an official Template's may be an address of the service's
// network, so a failure to fetch it names no URL to the task's caller (the log keeps it).
func TestATemplateMediaThatCannotBeFetchedIsToldWithoutItsURL(t *testing.T) {
	r := newRig(t)
	missing := r.url + "/media/internal/template.mp4" // 404
	seconds := int32(3)
	_, err := r.run(protocol.StageRequest{Key: "k", Capability: "video.template", Stage: "analyze", TemplateMediaURL: missing, Duration: &seconds})
	if want := "the template video could not be fetched (HTTP 404)"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	var detailed interface{ Detail() string }
	if !errors.As(err, &detailed) || !strings.Contains(detailed.Detail(), missing) {
		t.Errorf("%v keeps no detail with the URL for the log", err)
	}
}

// A video of frames larger than 4K is refused before any pipeline decodes it (the short-video
// render decodes every frame at full size): a small file of huge frames would take the worker's
// memory.
func TestAVideoOfFramesLargerThan4KIsRefused(t *testing.T) {
	r := newRig(t)
	wide := testmedia.MovingVideo(t, r.media, 0.4, "scale=4200:16")
	_, err := r.run(protocol.StageRequest{Key: "wide", Capability: "video.eraser", Stage: "analyze",
		Inputs: protocol.Inputs{SourceVideoURL: r.serve(wide)}})
	want := "the source video is 4200x16: videos of at most 4096 pixels a side"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to say %q", err, want)
	}
}

// Only the service's own media may be on the service's network: a face uploaded through the REST
// API and an official Template's media. A URL the caller chose (a face by URL, a ShortTemplate's
// target_url) reaching a private address is refused, whatever the service's media may reach:
// otherwise any tenant could make the worker fetch from the cluster's Services.
func TestOnlyTheServicesOwnMediaMayBeOnItsNetwork(t *testing.T) {
	r := newRig(t)
	loopback := netguard.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	r.p = New(Deps{
		Fetcher:        fetcher.New(netguard.Policy{}, 50<<20, 5*time.Second), // the rig's server is private to it
		ServiceFetcher: fetcher.New(loopback, 50<<20, 5*time.Second),
		Store:          r.blobs,
		Faces:          face.CLI{},
		TempDir:        t.TempDir(),
	})
	tmpl, face := r.serve(testmedia.FaceVideo(t, r.media, 1)), r.serve(testmedia.OtherFace(t, r.media))
	analyze := func(uploaded, official bool) error {
		_, err := r.run(protocol.StageRequest{Key: "k", Capability: "video.short", Stage: "analyze",
			TemplateMediaURL: tmpl, TemplateMediaOfficial: official,
			Inputs: protocol.Inputs{FaceImageURL: face, FaceImageUploaded: uploaded}})
		return err
	}

	if err := analyze(true, true); err != nil {
		t.Fatalf("uploaded face, official template: %v", err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "the "+what+" could not be fetched") || !errors.Is(err, netguard.ErrForbiddenDestination) {
			t.Errorf("err = %v, want the %s refused for its private address", err, what)
		}
	}
	refused("face image", analyze(false, true))
	refused("template video", analyze(true, false))
}

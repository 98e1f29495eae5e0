package capability

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
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

// Checked, holds (the worker's trust boundary for input URLs): a URL the
// caller chose (a face by URL, a ShortTemplate's target_url, an eraser's source video) cannot
// reach the --allow-private-service-media range by any road, while the service's own media (an
// uploaded face, an official template's media) on that range still works.
//
// The rig stands 127.0.0.1 for the public internet (the caller's fetcher allows it, as
// --allow-private-urls would) and 127.0.0.2 for the cluster's Service CIDR (only the service
// fetcher allows it, as --allow-private-service-media does). The roads tried, each reachable by
// any tenant (REST face/video/target_url fields are checked only for their literal form at
// submission, and a kubectl task's URLs not at all):
//   - a public host that answers 302 to the Service address (a redirect is followed by the
//     fetcher of the URL's origin, and each hop is checked against that fetcher's policy);
//   - the Service address spelled as one decimal number, in octal, in hex, in the short a.b
//     form, and as an IPv4-mapped IPv6 literal (netguard parses them as inet_aton does and
//     unmaps before it compares with the allow-list);
//   - a host name: the dial-time check sees the address whatever DNS answered (rebinding
//     included), which the spellings above reach through the same Control hook.
//
// What a user would see if it did not hold: nothing, which is the point (a blind SSRF): a
// tenant's task would make the worker GET any URL on the cluster's Services.
func TestACallersURLNeverReachesTheServiceMediaRange(t *testing.T) {
	r := newRig(t)
	// The "Service": the media directory served on 127.0.0.2.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	svc := httptest.NewUnstartedServer(http.StripPrefix("/media/", http.FileServer(http.Dir(r.media))))
	svc.Listener.Close()
	svc.Listener = ln
	svc.Start()
	t.Cleanup(svc.Close)
	port := ln.Addr().(*net.TCPAddr).Port
	onService := func(file string) string { return strings.Replace(r.serve(file), r.url, svc.URL, 1) }
	// The "public" host: redirects to wherever ?to= says.
	public := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, req.URL.Query().Get("to"), http.StatusFound)
	}))
	t.Cleanup(public.Close)
	redirectTo := func(target string) string { return public.URL + "/r?to=" + target }

	publicNet := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	serviceNet := append([]netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}, publicNet...)
	r.p = New(Deps{
		Fetcher:        fetcher.New(netguard.Policy{Allow: publicNet}, 50<<20, 5*time.Second),
		ServiceFetcher: fetcher.New(netguard.Policy{Allow: serviceNet}, 50<<20, 5*time.Second),
		Store:          r.blobs,
		Faces:          face.CLI{},
		TempDir:        t.TempDir(),
	})

	faceFile, tmplFile := testmedia.OtherFace(t, r.media), testmedia.FaceVideo(t, r.media, 1)
	faceOnService, tmplOnService := onService(faceFile), onService(tmplFile)
	short := func(face string, uploaded bool, tmpl string, official bool) error {
		_, err := r.run(protocol.StageRequest{Key: "k", Capability: "video.short", Stage: "analyze",
			TemplateMediaURL: tmpl, TemplateMediaOfficial: official,
			Inputs: protocol.Inputs{FaceImageURL: face, FaceImageUploaded: uploaded}})
		return err
	}

	// Legitimate users: an uploaded face and an official template's media on the Service work.
	if err := short(faceOnService, true, tmplOnService, true); err != nil {
		t.Fatalf("uploaded face and official template on the service's network: %v", err)
	}

	refused := func(what string, err error) {
		t.Helper()
		if err == nil || !errors.Is(err, netguard.ErrForbiddenDestination) {
			t.Errorf("%s: err = %v, want it refused as not a public address", what, err)
		}
	}
	path := strings.TrimPrefix(faceOnService, svc.URL)
	spellings := map[string]string{
		"redirect":                     redirectTo(faceOnService),
		"decimal":                      fmt.Sprintf("http://2130706434:%d%s", port, path),
		"octal":                        fmt.Sprintf("http://0177.0.0.02:%d%s", port, path),
		"hex":                          fmt.Sprintf("http://0x7f000002:%d%s", port, path),
		"short form":                   fmt.Sprintf("http://127.2:%d%s", port, path),
		"IPv4-mapped":                  fmt.Sprintf("http://[::ffff:127.0.0.2]:%d%s", port, path),
		"redirect to the decimal form": redirectTo(fmt.Sprintf("http://2130706434:%d%s", port, path)),
	}
	for how, u := range spellings {
		refused("a face by URL, "+how, short(u, false, tmplOnService, true))
	}
	// A ShortTemplate's target_url (not official), next to an uploaded face that is fetched.
	refused("a short template's target_url on the service", short(faceOnService, true, tmplOnService, false))
	refused("a short template's target_url, redirected", short(faceOnService, true, redirectTo(tmplOnService), false))
	// An eraser's source video.
	_, err = r.run(protocol.StageRequest{Key: "e", Capability: "video.eraser", Stage: "analyze",
		Inputs: protocol.Inputs{SourceVideoURL: redirectTo(tmplOnService)}})
	refused("an eraser's source video, redirected", err)
}

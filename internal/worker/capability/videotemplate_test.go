package capability

import (
	"math"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/worker/testmedia"
)

func TestVideoTemplateLoopsOrTrimsToExactlyTheDuration(t *testing.T) {
	r := newRig(t)
	tmpl := r.serve(testmedia.MovingVideo(t, r.media, 2, ""))
	for _, seconds := range []int32{1, 5} {
		analyze, render := analyzeThenRender(r, protocol.StageRequest{
			Key: "tmpl", Capability: "video.template", TemplateMediaURL: tmpl, Duration: &seconds,
		})
		wantMode := map[int32]string{1: "trim", 5: "loop"}[seconds]
		if analyze.Outputs["mode"] != wantMode {
			t.Errorf("%ds: mode = %q, want %s", seconds, analyze.Outputs["mode"], wantMode)
		}
		out := r.resultFile(render.Result)
		info := testmedia.Probe(t, out)
		if math.Abs(info.Duration-float64(seconds)) > 1.0/testmedia.Rate+1e-3 {
			t.Errorf("%ds: video lasts %.3fs, want %d ± 1 frame", seconds, info.Duration, seconds)
		}
		if frames := len(testmedia.Frames(t, out)); frames != int(seconds)*testmedia.Rate {
			t.Errorf("%ds: %d frames, want %d", seconds, frames, int(seconds)*testmedia.Rate)
		}
		if info.Width != testmedia.Width || info.Height != testmedia.Height || info.FPS != testmedia.Rate || !info.HasAudio || info.Codec != "h264" {
			t.Errorf("%ds: output = %+v, want the template's size, rate and sound", seconds, info)
		}
		if render.Result.MediaType != "video/mp4" || render.Result.Metadata["duration"] == "" {
			t.Errorf("%ds: result = %+v", seconds, render.Result)
		}
	}
}

func TestVideoTemplateRefusesAMissingDuration(t *testing.T) {
	r := newRig(t)
	_, err := r.p.Prepare(protocol.StageRequest{Key: "k", Capability: "video.template", Stage: "analyze", TemplateMediaURL: "http://x/y.mp4"})
	if err == nil {
		t.Fatal("accepted a video.template stage without a duration")
	}
}

// The API and the CRDs take durations of 1 to 3600 seconds, and a Template may offer any of
// them: the worker refused those over 600, so a catalog's hour-long offer failed every task it
// took (frozen, then refunded with "duration must be between 1 and 600 seconds").
func TestVideoTemplateTakesEveryDurationTheAPITakes(t *testing.T) {
	r := newRig(t)
	for _, seconds := range []int32{1, 600, 601, 3600} {
		if _, err := r.p.Prepare(protocol.StageRequest{Key: "k", Capability: "video.template", Stage: "analyze", TemplateMediaURL: "http://x/y.mp4", Duration: &seconds}); err != nil {
			t.Errorf("%d s: %v", seconds, err)
		}
	}
	for _, seconds := range []int32{0, 3601} {
		if _, err := r.p.Prepare(protocol.StageRequest{Key: "k", Capability: "video.template", Stage: "analyze", TemplateMediaURL: "http://x/y.mp4", Duration: &seconds}); err == nil {
			t.Errorf("%d s: accepted", seconds)
		}
	}
}

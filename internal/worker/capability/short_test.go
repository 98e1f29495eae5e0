package capability

import (
	"math"
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/worker/face"
	"github.com/videogen-dev/videogen-operator/internal/worker/testmedia"
)

func TestShortReplacesTheTemplateFaceAndNothingElse(t *testing.T) {
	r := newRig(t)
	tmpl := testmedia.FaceVideo(t, r.media, 2)
	analyze, render := analyzeThenRender(r, protocol.StageRequest{
		Key: "short", Capability: "video.short", TemplateMediaURL: r.serve(tmpl),
		Inputs: protocol.Inputs{FaceImageURL: r.serve(testmedia.OtherFace(t, r.media))},
	})

	track, err := face.DecodeTrack(analyze.Outputs["face_track"])
	if err != nil || len(track.Samples) < shortSamples/2 {
		t.Fatalf("face track = %s (%v), want most samples to find the face", analyze.Outputs["face_track"], err)
	}
	for _, s := range track.Samples {
		// The photo is pasted at x = 40 + 10 px/s, y = 20, 180 px wide: the face is inside it.
		left := 40 + 10*s.Frame/testmedia.Rate
		if b := s.Box.Rect(); b.Min.X < left || b.Max.X > left+180 || b.Min.Y < 20 || b.Dx() < 40 {
			t.Errorf("frame %d: face box %v is not on the face", s.Frame, b)
		}
	}

	r.checkProgress("render") // frame by frame, so a caller polling the task sees it move

	out := r.resultFile(render.Result)
	info, tmplInfo := testmedia.Probe(t, out), testmedia.Probe(t, tmpl)
	if info.Width != tmplInfo.Width || info.Height != tmplInfo.Height || info.FPS != tmplInfo.FPS ||
		math.Abs(info.Duration-tmplInfo.Duration) > 0.1 || !info.HasAudio || info.Codec != "h264" {
		t.Errorf("output %+v, template %+v: want H.264 at the template's size, rate, duration and sound", info, tmplInfo)
	}
	before, after := testmedia.Frames(t, tmpl), testmedia.Frames(t, out)
	if len(after) != len(before) {
		t.Fatalf("%d frames out, %d in", len(after), len(before))
	}
	var inside, outside float64
	for i := range before {
		box, _ := track.At(i)
		inside += testmedia.MeanAbsDiff(before[i], after[i], box.Inset(box.Dx()/4))
		outside += testmedia.MeanAbsDiffOutside(before[i], after[i], box.Inset(-2))
	}
	n := float64(len(before))
	if inside/n < 15 {
		t.Errorf("the face region changed by only %.1f on average", inside/n)
	}
	if outside/n > 3 {
		t.Errorf("the picture outside the face changed by %.2f on average", outside/n)
	}
}

func TestShortFailsClearlyWithoutAFaceInThePhoto(t *testing.T) {
	r := newRig(t)
	_, err := r.run(protocol.StageRequest{Key: "k", Capability: "video.short", Stage: "analyze",
		TemplateMediaURL: r.serve(testmedia.FaceVideo(t, r.media, 1)),
		Inputs:           protocol.Inputs{FaceImageURL: r.serve(testmedia.FacelessImage(t, r.media))}})
	if err == nil || !strings.Contains(err.Error(), "no face found in the face image") {
		t.Fatalf("err = %v", err)
	}
}

func TestShortFailsWhenTheTemplateHasNoFace(t *testing.T) {
	r := newRig(t)
	_, err := r.run(protocol.StageRequest{Key: "k", Capability: "video.short", Stage: "analyze",
		TemplateMediaURL: r.serve(testmedia.MovingVideo(t, r.media, 1, "")),
		Inputs:           protocol.Inputs{FaceImageURL: r.serve(testmedia.OtherFace(t, r.media))}})
	if err == nil || !strings.Contains(err.Error(), "in the template video") {
		t.Fatalf("err = %v", err)
	}
}

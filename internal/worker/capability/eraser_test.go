package capability

import (
	"encoding/json"
	"image"
	"math"
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
	"github.com/videogen-dev/videogen-operator/internal/worker/testmedia"
)

func TestEraserFindsTheWatermarkAndRemovesIt(t *testing.T) {
	r := newRig(t)
	src := testmedia.WatermarkedVideo(t, r.media, 2)
	analyze, render := analyzeThenRender(r, protocol.StageRequest{
		Key: "erase", Capability: "video.eraser", Inputs: protocol.Inputs{SourceVideoURL: r.serve(src)},
	})

	var boxes []raster.Box
	if err := json.Unmarshal([]byte(analyze.Outputs["overlays"]), &boxes); err != nil || len(boxes) != 1 {
		t.Fatalf("overlays = %s (%v), want one box", analyze.Outputs["overlays"], err)
	}
	found, mark := boxes[0].Rect(), testmedia.Watermark
	if !mark.In(found) || found.Dx()*found.Dy() > 3*mark.Dx()*mark.Dy() {
		t.Errorf("overlay box %v does not tightly cover the watermark %v", found, mark)
	}

	out := r.resultFile(render.Result)
	before, after := testmedia.Frames(t, src), testmedia.Frames(t, out)
	if len(after) != len(before) {
		t.Fatalf("%d frames out, %d in", len(after), len(before))
	}
	info, srcInfo := testmedia.Probe(t, out), testmedia.Probe(t, src)
	if info.Width != srcInfo.Width || info.Height != srcInfo.Height || info.FPS != srcInfo.FPS ||
		math.Abs(info.Duration-srcInfo.Duration) > 0.1 || !info.HasAudio || info.Codec != "h264" {
		t.Errorf("output %+v, source %+v", info, srcInfo)
	}
	var stdBefore, stdAfter, elsewhere float64
	for i := range before {
		stdBefore += testmedia.LumaStd(before[i], mark.Inset(2))
		stdAfter += testmedia.LumaStd(after[i], mark.Inset(2))
		elsewhere += testmedia.MeanAbsDiffOutside(before[i], after[i], found.Inset(-4))
	}
	n := float64(len(before))
	if stdAfter/n > stdBefore/n/3 {
		t.Errorf("luma contrast in the watermark: %.1f before, %.1f after; want it mostly gone", stdBefore/n, stdAfter/n)
	}
	if elsewhere/n > 3 {
		t.Errorf("the picture outside the overlay changed by %.2f on average", elsewhere/n)
	}
}

func TestEraserFailsWhenThereIsNothingToErase(t *testing.T) {
	r := newRig(t)
	src := testmedia.MovingVideo(t, r.media, 2, "")
	_, err := r.run(protocol.StageRequest{Key: "k", Capability: "video.eraser", Stage: "analyze",
		Inputs: protocol.Inputs{SourceVideoURL: r.serve(src)}})
	if err == nil || !strings.Contains(err.Error(), "no static overlay") {
		t.Fatalf("err = %v", err)
	}
}

func TestEraserRenderNeedsTheAnalyzeOutputs(t *testing.T) {
	r := newRig(t)
	_, err := r.p.Prepare(protocol.StageRequest{Key: "k", Capability: "video.eraser", Stage: "render",
		Inputs: protocol.Inputs{SourceVideoURL: "http://x/y.mp4"}})
	if err == nil || !strings.Contains(err.Error(), "previous.overlays") {
		t.Fatalf("err = %v", err)
	}
}

func TestDelogoBoxesStayInsideTheFrame(t *testing.T) {
	got := delogoChain([]raster.Box{raster.BoxOf(image.Rect(-5, 0, 40, 30)), raster.BoxOf(image.Rect(300, 220, 320, 240))}, 320, 240)
	want := "delogo=x=1:y=1:w=39:h=29,delogo=x=300:y=220:w=19:h=19"
	if got != want {
		t.Errorf("chain = %q, want %q", got, want)
	}
}

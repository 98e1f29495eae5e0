package capability

import (
	"encoding/json"
	"image"
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
	"github.com/videogen-dev/videogen-operator/internal/worker/testmedia"
)

func TestPosePlacesTheFaceOnTheTemplateFace(t *testing.T) {
	r := newRig(t)
	tmplFile := r.media + "/pose.jpg"
	copyFile(t, testmedia.FacePhotoPath(t), tmplFile)
	analyze, render := analyzeThenRender(r, protocol.StageRequest{
		Key: "pose", Capability: "image.pose", TemplateMediaURL: r.serve(tmplFile),
		Inputs: protocol.Inputs{FaceImageURL: r.serve(testmedia.OtherFace(t, r.media))},
	})
	if analyze.Outputs["target_source"] != "detected" {
		t.Errorf("target_source = %q", analyze.Outputs["target_source"])
	}
	var target raster.Box
	_ = json.Unmarshal([]byte(analyze.Outputs["target_box"]), &target)

	tmpl, out := load(t, tmplFile), load(t, r.resultFile(render.Result))
	if out.W != 512 || out.H != 600 || render.Result.MediaType != "image/png" || render.Result.Metadata["width"] != "512" {
		t.Fatalf("output %dx%d, result %+v; want a 512x600 PNG", out.W, out.H, render.Result)
	}
	box := target.Rect()
	if d := testmedia.MeanAbsDiff(tmpl, out, box.Inset(box.Dx()/4)); d < 15 {
		t.Errorf("the face region changed by only %.1f", d)
	}
	if d := testmedia.MeanAbsDiffOutside(tmpl, out, box); d != 0 {
		t.Errorf("pixels outside the face box changed by %.2f", d)
	}
}

func TestPoseUsesADefaultRegionWhenTheTemplateHasNoFace(t *testing.T) {
	r := newRig(t)
	analyze, render := analyzeThenRender(r, protocol.StageRequest{
		Key: "pose", Capability: "image.pose", TemplateMediaURL: r.serve(testmedia.StillImage(t, r.media, 400, 300)),
		Inputs: protocol.Inputs{FaceImageURL: r.serve(testmedia.OtherFace(t, r.media))},
	})
	want := encodeJSON(raster.BoxOf(image.Rect(150, 50, 250, 150)))
	if analyze.Outputs["target_source"] != "default" || analyze.Outputs["target_box"] != want {
		t.Errorf("outputs = %v, want the default region %s", analyze.Outputs, want)
	}
	if out := load(t, r.resultFile(render.Result)); out.W != 400 || out.H != 300 {
		t.Errorf("output %dx%d, want 400x300", out.W, out.H)
	}
}

func TestPoseFailsClearlyWithoutAFaceInThePhoto(t *testing.T) {
	r := newRig(t)
	_, err := r.run(protocol.StageRequest{Key: "k", Capability: "image.pose", Stage: "analyze",
		TemplateMediaURL: r.serve(testmedia.StillImage(t, r.media, 400, 300)),
		Inputs:           protocol.Inputs{FaceImageURL: r.serve(testmedia.FacelessImage(t, r.media))}})
	if err == nil || !strings.Contains(err.Error(), "no face found in the face image") {
		t.Fatalf("err = %v", err)
	}
}

func load(t *testing.T, path string) *raster.Image {
	t.Helper()
	img, err := raster.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

package capability

import (
	"context"
	"fmt"
	"image"
	"strconv"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/worker/composite"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

// pose puts the caller's face into the pose template image.
func (p *Pipelines) pose(req protocol.StageRequest) (stage, error) {
	if err := requireURL("template_media_url", req.TemplateMediaURL); err != nil {
		return nil, err
	}
	if err := requireURL("inputs.face_image_url", req.Inputs.FaceImageURL); err != nil {
		return nil, err
	}
	if req.Stage == "analyze" {
		return p.poseAnalyze, nil
	}
	var faceBox, target raster.Box
	if err := decodePrevious(req.Previous, "face_box", &faceBox); err != nil {
		return nil, err
	}
	if err := decodePrevious(req.Previous, "target_box", &target); err != nil {
		return nil, err
	}
	return func(ctx context.Context, s *scratch, req protocol.StageRequest, report jobs.Report) (jobs.Outcome, error) {
		return p.poseRender(ctx, s, req, faceBox.Rect(), target.Rect(), report)
	}, nil
}

func (p *Pipelines) poseAnalyze(ctx context.Context, s *scratch, req protocol.StageRequest, report jobs.Report) (jobs.Outcome, error) {
	report(10, "fetching the face image")
	facePath, _, err := p.fetchImage(ctx, s, "face image", req.Inputs.FaceImageURL, faceOrigin(req), "face")
	if err != nil {
		return jobs.Outcome{}, err
	}
	faceBox, err := p.callerFace(ctx, facePath)
	if err != nil {
		return jobs.Outcome{}, err
	}
	report(50, "fetching the pose template")
	tmplPath, tmpl, err := p.fetchImage(ctx, s, "pose template image", req.TemplateMediaURL, templateOrigin(req), "template")
	if err != nil {
		return jobs.Outcome{}, err
	}
	target, found, err := p.detectFace(ctx, tmplPath)
	if err != nil {
		return jobs.Outcome{}, fmt.Errorf("detecting the face in the pose template: %w", err)
	}
	how := "detected"
	if !found {
		target, how = defaultHeadRegion(tmpl.W, tmpl.H), "default"
	}
	return jobs.Outcome{Outputs: map[string]string{
		"face_box":      encodeJSON(raster.BoxOf(faceBox)),
		"target_box":    encodeJSON(raster.BoxOf(target)),
		"target_source": how,
	}}, nil
}

// defaultHeadRegion is where a pose template without a detectable face gets one: a square a
// third of the short side, centred horizontally, in the upper third where heads usually are.
func defaultHeadRegion(w, h int) image.Rectangle {
	side := max(min(w, h)/3, 1)
	x, y := (w-side)/2, max(h/3-side/2, 0)
	return image.Rect(x, y, x+side, y+side)
}

func (p *Pipelines) poseRender(ctx context.Context, s *scratch, req protocol.StageRequest, faceBox, target image.Rectangle, report jobs.Report) (jobs.Outcome, error) {
	report(10, "fetching the face image")
	_, photo, err := p.fetchImage(ctx, s, "face image", req.Inputs.FaceImageURL, faceOrigin(req), "face")
	if err != nil {
		return jobs.Outcome{}, err
	}
	faceCrop := photo.Crop(faceBox)
	if faceCrop.W == 0 || faceCrop.H == 0 {
		return jobs.Outcome{}, fmt.Errorf("previous.face_box %v lies outside the %dx%d face image", faceBox, photo.W, photo.H)
	}
	report(40, "fetching the pose template")
	_, tmpl, err := p.fetchImage(ctx, s, "pose template image", req.TemplateMediaURL, templateOrigin(req), "template")
	if err != nil {
		return jobs.Outcome{}, err
	}
	report(70, "placing the face")
	composite.Paste(tmpl, faceCrop, target, composite.Default)
	out := s.path("out.png")
	if err := tmpl.SavePNG(out); err != nil {
		return jobs.Outcome{}, err
	}
	report(90, "storing the result")
	res, err := p.publish(ctx, s, out, "image/png", map[string]string{"width": strconv.Itoa(tmpl.W), "height": strconv.Itoa(tmpl.H)})
	return jobs.Outcome{Result: res}, err
}

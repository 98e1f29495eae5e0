package capability

import (
	"context"
	"fmt"
	"image"
	"strconv"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/worker/composite"
	"github.com/videogen-dev/videogen-operator/internal/worker/face"
	"github.com/videogen-dev/videogen-operator/internal/worker/ffmpeg"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

// Face tracking looks at this many template frames; boxes in between are interpolated.
// Frames are scaled down for detection, which needs faces, not pixels.
const (
	shortSamples  = 8
	detectMaxSide = 960
)

// short puts the caller's face into the template video in place of the face there.
func (p *Pipelines) short(req protocol.StageRequest) (stage, error) {
	if err := requireURL("template_media_url", req.TemplateMediaURL); err != nil {
		return nil, err
	}
	if err := requireURL("inputs.face_image_url", req.Inputs.FaceImageURL); err != nil {
		return nil, err
	}
	if req.Stage == "analyze" {
		return p.shortAnalyze, nil
	}
	var (
		track   face.Track
		faceBox raster.Box
	)
	if err := decodePrevious(req.Previous, "face_track", &track); err != nil {
		return nil, err
	}
	if err := decodePrevious(req.Previous, "face_box", &faceBox); err != nil {
		return nil, err
	}
	return func(ctx context.Context, s *scratch, req protocol.StageRequest, report jobs.Report) (jobs.Outcome, error) {
		return p.shortRender(ctx, s, req, track, faceBox.Rect(), report)
	}, nil
}

func (p *Pipelines) shortAnalyze(ctx context.Context, s *scratch, req protocol.StageRequest, report jobs.Report) (jobs.Outcome, error) {
	report(5, "fetching the face image")
	facePath, _, err := p.fetchImage(ctx, s, "face image", req.Inputs.FaceImageURL, faceOrigin(req), "face")
	if err != nil {
		return jobs.Outcome{}, err
	}
	faceBox, err := p.callerFace(ctx, facePath)
	if err != nil {
		return jobs.Outcome{}, err
	}
	report(15, "fetching the template")
	in, info, err := p.fetchVideo(ctx, s, "template video", req.TemplateMediaURL, templateOrigin(req), "template")
	if err != nil {
		return jobs.Outcome{}, err
	}
	report(25, "sampling template frames")
	track, err := p.trackFaces(ctx, s, in, info, report)
	if err != nil {
		return jobs.Outcome{}, err
	}
	return jobs.Outcome{Outputs: map[string]string{
		"template":    encodeJSON(info),
		"face_box":    encodeJSON(raster.BoxOf(faceBox)),
		"face_track":  track.Encode(),
		"faces_found": fmt.Sprintf("%d/%d", len(track.Samples), shortSamples),
	}}, nil
}

// trackFaces detects the face in sampled frames of the template.
func (p *Pipelines) trackFaces(ctx context.Context, s *scratch, path string, info ffmpeg.Info, report jobs.Report) (face.Track, error) {
	smp, err := p.sample(ctx, path, info, shortSamples, detectMaxSide)
	if err != nil {
		return face.Track{}, err
	}
	track := face.Track{Frames: info.Frames()}
	for k, frame := range smp.frames {
		progress(report, 30, 95, k, len(smp.frames), "finding the face in the template")
		file := s.path("sample-" + strconv.Itoa(k) + ".png")
		if err := frame.SavePNG(file); err != nil {
			return face.Track{}, err
		}
		r, ok, err := p.detectFace(ctx, file)
		if err != nil {
			return face.Track{}, fmt.Errorf("detecting faces in the template: %w", err)
		}
		if ok {
			track.Samples = append(track.Samples, face.Sample{Frame: smp.index[k], Box: raster.BoxOf(smp.toVideo(r))})
		}
	}
	if len(track.Samples) == 0 {
		return face.Track{}, fmt.Errorf("%w in the template video: it cannot be used for face swaps", face.ErrNoFace)
	}
	return track.Smooth(), nil
}

func (p *Pipelines) shortRender(ctx context.Context, s *scratch, req protocol.StageRequest, track face.Track, faceBox image.Rectangle, report jobs.Report) (jobs.Outcome, error) {
	report(2, "fetching the face image")
	_, photo, err := p.fetchImage(ctx, s, "face image", req.Inputs.FaceImageURL, faceOrigin(req), "face")
	if err != nil {
		return jobs.Outcome{}, err
	}
	faceCrop := photo.Crop(faceBox)
	if faceCrop.W == 0 || faceCrop.H == 0 {
		return jobs.Outcome{}, fmt.Errorf("previous.face_box %v lies outside the %dx%d face image", faceBox, photo.W, photo.H)
	}
	report(5, "fetching the template")
	in, info, err := p.fetchVideo(ctx, s, "template video", req.TemplateMediaURL, templateOrigin(req), "template")
	if err != nil {
		return jobs.Outcome{}, err
	}

	out := s.path("out.mp4")
	if err := p.swapFaces(ctx, in, out, info, track, faceCrop, report); err != nil {
		return jobs.Outcome{}, err
	}
	report(95, "storing the result")
	res, err := p.publishVideo(ctx, s, out)
	return jobs.Outcome{Result: res}, err
}

// swapFaces decodes the template, pastes the face into every frame where the track has one,
// and encodes the frames with the template's sound.
func (p *Pipelines) swapFaces(ctx context.Context, in, out string, info ffmpeg.Info, track face.Track, faceCrop *raster.Image, report jobs.Report) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // kills the encoder if decoding fails half-way
	enc, err := p.d.Tools.NewEncoder(ctx, out, ffmpeg.EncodeOptions{Width: info.Width, Height: info.Height, FrameRate: info.FrameRate, AudioFrom: in})
	if err != nil {
		return fmt.Errorf("starting the encoder: %w", err)
	}
	total := info.Frames()
	err = p.d.Tools.Decode(ctx, in, info.Width, info.Height, "", func(i int, frame *raster.Image) error {
		if box, ok := track.At(i); ok {
			composite.Paste(frame, faceCrop, box, composite.Default)
		}
		if i%10 == 0 {
			progress(report, 10, 90, min(i, total), total, "rendering frames")
		}
		return enc.Write(frame)
	})
	if err != nil {
		cancel()
		_ = enc.Close()
		return fmt.Errorf("rendering the template: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("encoding the result: %w", err)
	}
	return nil
}

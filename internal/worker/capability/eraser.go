package capability

import (
	"context"
	"errors"
	"fmt"
	"image"
	"strconv"
	"strings"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/worker/ffmpeg"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
	"github.com/videogen-dev/videogen-operator/internal/worker/overlay"
	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

// Overlay analysis looks at this many frames, at most this many pixels on a side: temporal
// statistics need many frames, not many pixels.
const (
	eraserSamples = 24
	eraserMaxSide = 480
)

// eraser removes static overlays from the caller's video.
func (p *Pipelines) eraser(req protocol.StageRequest) (stage, error) {
	if err := requireURL("inputs.source_video_url", req.Inputs.SourceVideoURL); err != nil {
		return nil, err
	}
	if req.Stage == "analyze" {
		return p.eraserAnalyze, nil
	}
	var boxes []raster.Box
	if err := decodePrevious(req.Previous, "overlays", &boxes); err != nil {
		return nil, err
	}
	return func(ctx context.Context, s *scratch, req protocol.StageRequest, report jobs.Report) (jobs.Outcome, error) {
		return p.eraserRender(ctx, s, req, boxes, report)
	}, nil
}

func (p *Pipelines) eraserAnalyze(ctx context.Context, s *scratch, req protocol.StageRequest, report jobs.Report) (jobs.Outcome, error) {
	report(5, "fetching the video")
	in, info, err := p.fetchVideo(ctx, s, "source video", req.Inputs.SourceVideoURL, givenByCaller, "source")
	if err != nil {
		return jobs.Outcome{}, err
	}
	report(30, "sampling frames")
	smp, err := p.sample(ctx, in, info, eraserSamples, eraserMaxSide)
	if err != nil {
		return jobs.Outcome{}, err
	}
	report(70, "looking for static overlays")
	found := overlay.Find(smp.frames, overlay.Options{})
	if len(found) == 0 {
		// Failing refunds the caller: rendering would return their video unchanged.
		return jobs.Outcome{}, errors.New("no static overlay (watermark, logo or caption) was found in the video")
	}
	frame := image.Rect(0, 0, info.Width, info.Height)
	boxes := make([]raster.Box, 0, len(found))
	for _, r := range found {
		// A margin covers the overlay's antialiased edge and any shadow.
		pad := max(r.Dx(), r.Dy())/20 + 1
		boxes = append(boxes, raster.BoxOf(smp.toVideo(r.Inset(-pad)).Intersect(frame)))
	}
	return jobs.Outcome{Outputs: map[string]string{
		"video":         encodeJSON(info),
		"overlays":      encodeJSON(boxes),
		"overlay_count": strconv.Itoa(len(boxes)),
	}}, nil
}

func (p *Pipelines) eraserRender(ctx context.Context, s *scratch, req protocol.StageRequest, boxes []raster.Box, report jobs.Report) (jobs.Outcome, error) {
	report(5, "fetching the video")
	in, info, err := p.fetchVideo(ctx, s, "source video", req.Inputs.SourceVideoURL, givenByCaller, "source")
	if err != nil {
		return jobs.Outcome{}, err
	}
	filter := delogoChain(boxes, info.Width, info.Height)
	report(20, "removing overlays")
	out := s.path("out.mp4")
	args := append([]string{"-i", in, "-map", "0:v:0", "-map", "0:a:0?", "-c:a", "aac", "-b:a", "128k"}, ffmpeg.H264Args(filter)...)
	if err := p.d.Tools.Run(ctx, append(args, out)...); err != nil {
		return jobs.Outcome{}, fmt.Errorf("removing overlays: %w", err)
	}
	report(90, "storing the result")
	res, err := p.publishVideo(ctx, s, out)
	if res != nil {
		res.Metadata["overlays_removed"] = strconv.Itoa(len(boxes))
	}
	return jobs.Outcome{Result: res}, err
}

// delogoChain is one ffmpeg delogo filter per box. delogo interpolates from the pixels around
// the box, so each box is kept one pixel inside the frame.
func delogoChain(boxes []raster.Box, w, h int) string {
	inner := image.Rect(1, 1, w-1, h-1)
	var parts []string
	for _, b := range boxes {
		r := b.Rect().Intersect(inner)
		if r.Dx() < 2 || r.Dy() < 2 {
			continue
		}
		parts = append(parts, fmt.Sprintf("delogo=x=%d:y=%d:w=%d:h=%d", r.Min.X, r.Min.Y, r.Dx(), r.Dy()))
	}
	return strings.Join(parts, ",")
}

package capability

import (
	"context"
	"fmt"
	"strconv"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/worker/ffmpeg"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
)

// maxTemplateSeconds is the longest duration rendered: the API's and the CRDs' maximum
// (spec.duration, a Template's maxDuration), so that every duration a catalog may offer renders
// here. Below it, the stage's deadline (the task's timeout) bounds how long a render may take.
const maxTemplateSeconds = 3600

// videoTemplate trims or loops the template to the requested duration.
func (p *Pipelines) videoTemplate(req protocol.StageRequest) (stage, error) {
	if err := requireURL("template_media_url", req.TemplateMediaURL); err != nil {
		return nil, err
	}
	if req.Duration == nil || *req.Duration < 1 || *req.Duration > maxTemplateSeconds {
		return nil, invalid("duration must be between 1 and %d seconds", maxTemplateSeconds)
	}
	if req.Stage == "analyze" {
		return p.templateAnalyze, nil
	}
	return p.templateRender, nil
}

func (p *Pipelines) templateAnalyze(ctx context.Context, s *scratch, req protocol.StageRequest, report jobs.Report) (jobs.Outcome, error) {
	report(10, "fetching the template")
	_, info, err := p.fetchVideo(ctx, s, "template video", req.TemplateMediaURL, templateOrigin(req), "template")
	if err != nil {
		return jobs.Outcome{}, err
	}
	mode := "trim"
	if float64(*req.Duration) > info.Duration {
		mode = "loop"
	}
	return jobs.Outcome{Outputs: map[string]string{
		"template": encodeJSON(info),
		"duration": strconv.Itoa(int(*req.Duration)),
		"mode":     mode,
	}}, nil
}

func (p *Pipelines) templateRender(ctx context.Context, s *scratch, req protocol.StageRequest, report jobs.Report) (jobs.Outcome, error) {
	report(5, "fetching the template")
	in, info, err := p.fetchVideo(ctx, s, "template video", req.TemplateMediaURL, templateOrigin(req), "template")
	if err != nil {
		return jobs.Outcome{}, err
	}
	report(20, "encoding")
	out := s.path("out.mp4")
	seconds := strconv.Itoa(int(*req.Duration))
	// Looping forever and cutting at the duration trims a long template and loops a short one
	// with one command; the frame count pins the video to exactly duration × rate.
	args := []string{"-stream_loop", "-1", "-i", in, "-t", seconds, "-map", "0:v:0", "-map", "0:a:0?",
		"-r", info.FrameRate, "-frames:v", strconv.Itoa(int(float64(*req.Duration)*info.FPS + 0.5)), "-c:a", "aac", "-b:a", "128k"}
	args = append(args, ffmpeg.H264Args("")...)
	if err := p.d.Tools.Run(ctx, append(args, out)...); err != nil {
		return jobs.Outcome{}, fmt.Errorf("rendering the template at %ss: %w", seconds, err)
	}
	report(90, "storing the result")
	res, err := p.publishVideo(ctx, s, out)
	return jobs.Outcome{Result: res}, err
}

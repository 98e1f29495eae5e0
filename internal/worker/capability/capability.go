// Package capability is what the reference worker actually does for each capability: the
// analyze and render stages of video.short, video.eraser, video.template and image.pose, built
// from ffmpeg, a face detector and Go compositing.
package capability

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/worker/face"
	"github.com/videogen-dev/videogen-operator/internal/worker/fetcher"
	"github.com/videogen-dev/videogen-operator/internal/worker/ffmpeg"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
)

// Deps are the tools the stages use.
type Deps struct {
	// Fetcher fetches the caller's URLs: a face or a source video by URL, a ShortTemplate's media.
	Fetcher *fetcher.Fetcher
	// ServiceFetcher fetches the service's own media: faces uploaded through the REST API and
	// official Templates' media, which may live on the service's network (nil: Fetcher).
	ServiceFetcher *fetcher.Fetcher
	Store          blobstore.Store
	Tools          ffmpeg.Tools
	Faces          face.Detector
	// TempDir holds each stage's scratch directory; the system's if empty.
	TempDir string
}

// Pipelines turns stage requests into work.
type Pipelines struct{ d Deps }

// New returns the pipelines over d.
func New(d Deps) *Pipelines {
	if d.ServiceFetcher == nil {
		d.ServiceFetcher = d.Fetcher
	}
	return &Pipelines{d: d}
}

// ErrInvalid is wrapped by every refusal of a request: the caller must change it.
var ErrInvalid = errors.New("invalid stage request")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// stage is one stage of one capability, run in its own scratch directory.
type stage func(ctx context.Context, s *scratch, req protocol.StageRequest, report jobs.Report) (jobs.Outcome, error)

// Prepare checks req and returns its work, or an error wrapping ErrInvalid.
func (p *Pipelines) Prepare(req protocol.StageRequest) (jobs.Func, error) {
	if req.Key == "" {
		return nil, invalid("key is required")
	}
	if req.Stage != "analyze" && req.Stage != "render" {
		return nil, invalid("stage must be analyze or render, not %q", req.Stage)
	}
	var (
		run stage
		err error
	)
	switch req.Capability {
	case "video.short":
		run, err = p.short(req)
	case "video.eraser":
		run, err = p.eraser(req)
	case "video.template":
		run, err = p.videoTemplate(req)
	case "image.pose":
		run, err = p.pose(req)
	default:
		return nil, fmt.Errorf("%w: capability %q is not served by this worker", ErrUnsupported, req.Capability)
	}
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, report jobs.Report) (jobs.Outcome, error) {
		dir, err := os.MkdirTemp(p.d.TempDir, "stage-*")
		if err != nil {
			return jobs.Outcome{}, err
		}
		defer os.RemoveAll(dir)
		s := &scratch{dir: dir}
		out, err := run(ctx, s, req, report)
		if err != nil {
			p.discard(ctx, s.stored)
			return out, err
		}
		// The table discards a result it drops: the stage was cancelled while it stored it.
		out.Discard = func() { p.discard(ctx, s.stored) }
		return out, nil
	}, nil
}

// ErrUnsupported: the worker does not serve that capability.
var ErrUnsupported = errors.New("unsupported capability")

func requireURL(name, value string) error {
	if value == "" {
		return invalid("%s is required", name)
	}
	return nil
}

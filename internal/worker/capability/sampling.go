package capability

import (
	"context"
	"fmt"
	"image"

	"github.com/videogen-dev/videogen-operator/internal/worker/ffmpeg"
	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

// sampled are frames taken at a regular stride, possibly scaled down for analysis.
type sampled struct {
	frames []*raster.Image
	// index of each frame in the full video.
	index []int
	// scale from analysis pixels to video pixels.
	scale float64
}

// sample decodes about n evenly spaced frames, scaled so that no side exceeds maxSide.
func (p *Pipelines) sample(ctx context.Context, path string, info ffmpeg.Info, n, maxSide int) (sampled, error) {
	stride := max((info.Frames()+n-1)/n, 1)
	scale := min(float64(maxSide)/float64(max(info.Width, info.Height)), 1)
	w, h := even(float64(info.Width)*scale), even(float64(info.Height)*scale)
	s := sampled{scale: float64(info.Width) / float64(w)}
	err := p.d.Tools.Decode(ctx, path, w, h, ffmpeg.EveryNth(stride), func(i int, f *raster.Image) error {
		// The stride comes from the duration and frame rate the file declares, which it may
		// understate: kept, every frame of a long video would be held in memory.
		if len(s.frames) >= 2*n+2 {
			return invalid("the video has many more frames than its duration (%.3g s) and frame rate (%s) say", info.Duration, info.FrameRate)
		}
		s.frames = append(s.frames, f)
		s.index = append(s.index, i*stride)
		return nil
	})
	if err != nil {
		return sampled{}, fmt.Errorf("sampling frames: %w", err)
	}
	return s, nil
}

// toVideo scales a box found in a sampled frame back to video pixels.
func (s sampled) toVideo(r image.Rectangle) image.Rectangle {
	f := func(v int) int { return int(float64(v)*s.scale + 0.5) }
	return image.Rect(f(r.Min.X), f(r.Min.Y), f(r.Max.X), f(r.Max.Y))
}

func even(v float64) int { return max(int(v/2+0.5)*2, 2) }

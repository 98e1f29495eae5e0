// Package composite places one picture into a region of another the way a face swap needs:
// scaled to the region, colour-matched to what it replaces, and blended through a soft-edged
// ellipse so no seam shows.
package composite

import (
	"image"
	"math"

	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

// Options tune Paste.
type Options struct {
	// Feather is the share of the ellipse's radius over which the paste fades out (0..1).
	Feather float64
	// MatchColour shifts and scales each channel of the pasted picture to the mean and
	// standard deviation of the region it covers, so skin tone and lighting follow the scene.
	MatchColour bool
}

// Default suits faces.
var Default = Options{Feather: 0.3, MatchColour: true}

// Paste blends src, scaled to box, into dst. Only pixels inside box change; the parts of box
// outside dst are skipped.
func Paste(dst, src *raster.Image, box image.Rectangle, o Options) {
	w, h := box.Dx(), box.Dy()
	visible := box.Intersect(dst.Bounds())
	if w <= 0 || h <= 0 || visible.Empty() || src.W == 0 || src.H == 0 {
		return
	}
	face := src.Resize(w, h)
	mask := Ellipse(w, h, o.Feather)
	gain, offset := [3]float64{1, 1, 1}, [3]float64{}
	if o.MatchColour {
		gain, offset = colourTransfer(dst, face, box, visible, mask)
	}
	for y := visible.Min.Y; y < visible.Max.Y; y++ {
		for x := visible.Min.X; x < visible.Max.X; x++ {
			fx, fy := x-box.Min.X, y-box.Min.Y
			a := mask[fy*w+fx]
			if a <= 0 {
				continue
			}
			di, si := (y*dst.W+x)*3, (fy*w+fx)*3
			for c := 0; c < 3; c++ {
				s := float64(face.Pix[si+c])*gain[c] + offset[c]
				dst.Pix[di+c] = clamp8(a*s + (1-a)*float64(dst.Pix[di+c]))
			}
		}
	}
}

// Ellipse is a w×h alpha mask: 1 inside the inscribed ellipse, fading smoothly to 0 at its
// edge over the outer feather share of the radius.
func Ellipse(w, h int, feather float64) []float64 {
	feather = min(max(feather, 1e-3), 1)
	mask := make([]float64, w*h)
	rx, ry := float64(w)/2, float64(h)/2
	for y := 0; y < h; y++ {
		dy := (float64(y) + 0.5 - ry) / ry
		for x := 0; x < w; x++ {
			dx := (float64(x) + 0.5 - rx) / rx
			r := math.Sqrt(dx*dx + dy*dy)
			t := min(max((1-r)/feather, 0), 1)
			mask[y*w+x] = t * t * (3 - 2*t) // smoothstep: no visible ring where the fade starts
		}
	}
	return mask
}

// colourTransfer returns per-channel gain and offset that map face's statistics inside the
// mask's core onto those of the dst pixels it will cover.
func colourTransfer(dst, face *raster.Image, box, visible image.Rectangle, mask []float64) (gain, offset [3]float64) {
	var fs, ds [3]stats
	for y := visible.Min.Y; y < visible.Max.Y; y++ {
		for x := visible.Min.X; x < visible.Max.X; x++ {
			fx, fy := x-box.Min.X, y-box.Min.Y
			if mask[fy*face.W+fx] < 0.5 {
				continue
			}
			di, si := (y*dst.W+x)*3, (fy*face.W+fx)*3
			for c := 0; c < 3; c++ {
				fs[c].add(float64(face.Pix[si+c]))
				ds[c].add(float64(dst.Pix[di+c]))
			}
		}
	}
	for c := 0; c < 3; c++ {
		gain[c], offset[c] = 1, 0
		if fs[c].n == 0 {
			continue
		}
		// Bounded: a flat face or a flat background must not blow the contrast up or away.
		gain[c] = min(max(ds[c].std()/max(fs[c].std(), 1), 0.5), 2)
		offset[c] = ds[c].mean() - gain[c]*fs[c].mean()
	}
	return gain, offset
}

type stats struct{ n, sum, sq float64 }

func (s *stats) add(v float64) { s.n++; s.sum += v; s.sq += v * v }
func (s stats) mean() float64  { return s.sum / s.n }
func (s stats) std() float64   { return math.Sqrt(max(s.sq/s.n-s.mean()*s.mean(), 0)) }

func clamp8(v float64) uint8 { return uint8(min(max(v+0.5, 0), 255)) }

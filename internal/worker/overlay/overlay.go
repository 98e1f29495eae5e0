// Package overlay finds what was burned into a video on top of its picture (watermarks, logos,
// captions that stay put): pixels that barely change over time while the picture around them
// moves, and that stand out from their surroundings by a sharp edge.
package overlay

import (
	"image"
	"math"
	"sort"

	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

// Options tune Find; the zero value means the defaults.
type Options struct {
	// StaticStd is the largest temporal standard deviation of luma (0-255) a static pixel has;
	// compression noise stays well under it, moving content far over it.
	StaticStd float64
	// MinEdge is the least Sobel gradient magnitude of the mean frame at an overlay's outline.
	MinEdge float64
	// MaxBoxShare is the largest share of the frame one overlay may cover: anything larger is
	// a static scene, not an overlay.
	MaxBoxShare float64
	// MaxBoxes bounds how many overlays are returned, largest first.
	MaxBoxes int
}

func (o Options) withDefaults() Options {
	if o.StaticStd == 0 {
		o.StaticStd = 6
	}
	if o.MinEdge == 0 {
		o.MinEdge = 80
	}
	if o.MaxBoxShare == 0 {
		o.MaxBoxShare = 0.25
	}
	if o.MaxBoxes == 0 {
		o.MaxBoxes = 8
	}
	return o
}

// Find returns the bounding boxes of static overlays in frames, which must all have one size.
// Fewer than three frames carry no information about motion, so they yield nothing.
func Find(frames []*raster.Image, o Options) []image.Rectangle {
	o = o.withDefaults()
	if len(frames) < 3 {
		return nil
	}
	w, h := frames[0].W, frames[0].H
	mean, std := temporalStats(frames)
	edge := sobel(mean, w, h)

	seed := make([]bool, w*h)
	for i := range seed {
		seed[i] = std[i] < o.StaticStd && edge[i] >= o.MinEdge
	}
	// Join the outlines of one overlay (letters of a caption, a logo's parts) into one blob.
	radius := max(min(w, h)/60, 2)
	grown := dilate(seed, w, h, radius)
	if share(grown) > staticSceneShare {
		return nil // a still shot: its whole picture would look like one overlay
	}
	blobs := components(grown, w, h)

	minArea := max(w*h/2000, 16)
	var boxes []image.Rectangle
	for _, b := range blobs {
		area := b.Dx() * b.Dy()
		if area < minArea || float64(area) > o.MaxBoxShare*float64(w*h) {
			continue
		}
		boxes = append(boxes, b.Intersect(image.Rect(0, 0, w, h)))
	}
	sort.Slice(boxes, func(i, j int) bool { return boxes[i].Dx()*boxes[i].Dy() > boxes[j].Dx()*boxes[j].Dy() })
	if len(boxes) > o.MaxBoxes {
		boxes = boxes[:o.MaxBoxes]
	}
	return boxes
}

// staticSceneShare is the share of still, sharp picture above which a video is a still shot.
const staticSceneShare = 0.4

func share(set []bool) float64 {
	n := 0
	for _, v := range set {
		if v {
			n++
		}
	}
	return float64(n) / float64(len(set))
}

// temporalStats returns each pixel's mean and standard deviation of luma over the frames.
func temporalStats(frames []*raster.Image) (mean, std []float64) {
	n := len(frames[0].Pix) / 3
	sum, sq := make([]float64, n), make([]float64, n)
	for _, f := range frames {
		for i, v := range f.Luma() {
			sum[i] += v
			sq[i] += v * v
		}
	}
	k := float64(len(frames))
	mean, std = make([]float64, n), make([]float64, n)
	for i := range sum {
		mean[i] = sum[i] / k
		std[i] = math.Sqrt(max(sq[i]/k-mean[i]*mean[i], 0))
	}
	return mean, std
}

// sobel returns |gx|+|gy| of the 3×3 Sobel operator; border pixels are 0.
func sobel(l []float64, w, h int) []float64 {
	out := make([]float64, w*h)
	for y := 1; y < h-1; y++ {
		for x := 1; x < w-1; x++ {
			at := func(dx, dy int) float64 { return l[(y+dy)*w+x+dx] }
			gx := at(1, -1) + 2*at(1, 0) + at(1, 1) - at(-1, -1) - 2*at(-1, 0) - at(-1, 1)
			gy := at(-1, 1) + 2*at(0, 1) + at(1, 1) - at(-1, -1) - 2*at(0, -1) - at(1, -1)
			out[y*w+x] = math.Abs(gx) + math.Abs(gy)
		}
	}
	return out
}

// dilate grows the set by a square of the given radius (separably: rows, then columns).
func dilate(in []bool, w, h, r int) []bool {
	rows := make([]bool, w*h)
	for y := 0; y < h; y++ {
		last := -1 << 30 // x of the latest set pixel seen
		for x := 0; x < w+r; x++ {
			if x < w && in[y*w+x] {
				last = x
			}
			if x-r >= 0 && x-last <= 2*r {
				rows[y*w+x-r] = true
			}
		}
	}
	out := make([]bool, w*h)
	for x := 0; x < w; x++ {
		last := -1 << 30
		for y := 0; y < h+r; y++ {
			if y < h && rows[y*w+x] {
				last = y
			}
			if y-r >= 0 && y-last <= 2*r {
				out[(y-r)*w+x] = true
			}
		}
	}
	return out
}

// components returns the bounding box of every 4-connected set of true pixels.
func components(set []bool, w, h int) []image.Rectangle {
	seen := make([]bool, w*h)
	var boxes []image.Rectangle
	var stack []int
	for start := range set {
		if !set[start] || seen[start] {
			continue
		}
		box := image.Rect(start%w, start/w, start%w+1, start/w+1)
		seen[start] = true
		stack = append(stack[:0], start)
		for len(stack) > 0 {
			p := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			x, y := p%w, p/w
			box = box.Union(image.Rect(x, y, x+1, y+1))
			for _, q := range [4]int{p - 1, p + 1, p - w, p + w} {
				if q < 0 || q >= w*h || seen[q] || !set[q] || (q == p-1 && x == 0) || (q == p+1 && x == w-1) {
					continue
				}
				seen[q] = true
				stack = append(stack, q)
			}
		}
		boxes = append(boxes, box)
	}
	return boxes
}

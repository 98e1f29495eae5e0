package testmedia

import (
	"image"
	"math"
	"strconv"

	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

// MeanAbsDiff is the mean absolute difference of two equally sized frames inside r.
func MeanAbsDiff(a, b *raster.Image, r image.Rectangle) float64 {
	r = r.Intersect(a.Bounds())
	sum, n := 0.0, 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			i := (y*a.W + x) * 3
			for c := 0; c < 3; c++ {
				sum += math.Abs(float64(a.Pix[i+c]) - float64(b.Pix[i+c]))
				n++
			}
		}
	}
	return sum / float64(max(n, 1))
}

// MeanAbsDiffOutside is MeanAbsDiff over every pixel not in r.
func MeanAbsDiffOutside(a, b *raster.Image, r image.Rectangle) float64 {
	sum, n := 0.0, 0
	for y := 0; y < a.H; y++ {
		for x := 0; x < a.W; x++ {
			if image.Pt(x, y).In(r) {
				continue
			}
			i := (y*a.W + x) * 3
			for c := 0; c < 3; c++ {
				sum += math.Abs(float64(a.Pix[i+c]) - float64(b.Pix[i+c]))
				n++
			}
		}
	}
	return sum / float64(max(n, 1))
}

// EdgeEnergy is the mean absolute luma difference between neighbouring pixels inside r: high
// where a sharp-edged logo sits, low where it was smoothed away.
func EdgeEnergy(f *raster.Image, r image.Rectangle) float64 {
	l := f.Luma()
	r = r.Intersect(image.Rect(0, 0, f.W-1, f.H-1))
	sum, n := 0.0, 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			sum += math.Abs(l[y*f.W+x+1]-l[y*f.W+x]) + math.Abs(l[(y+1)*f.W+x]-l[y*f.W+x])
			n++
		}
	}
	return sum / float64(max(n, 1))
}

func itoa(v int) string     { return strconv.Itoa(v) }
func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// LumaStd is the standard deviation of luma inside r: a black-and-white logo has a lot, the
// smooth fill that replaces it little.
func LumaStd(f *raster.Image, r image.Rectangle) float64 {
	l := f.Luma()
	r = r.Intersect(f.Bounds())
	sum, sq, n := 0.0, 0.0, 0.0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			v := l[y*f.W+x]
			sum, sq, n = sum+v, sq+v*v, n+1
		}
	}
	m := sum / n
	return math.Sqrt(max(sq/n-m*m, 0))
}

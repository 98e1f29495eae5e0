package composite

import (
	"image"
	"math"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

func filled(w, h int, r, g, b uint8) *raster.Image {
	m := raster.New(w, h)
	for i := 0; i < len(m.Pix); i += 3 {
		m.Pix[i], m.Pix[i+1], m.Pix[i+2] = r, g, b
	}
	return m
}

func TestPasteChangesOnlyTheBoxAndFadesAtItsEdge(t *testing.T) {
	dst := filled(100, 80, 50, 50, 50)
	src := filled(30, 30, 250, 10, 10)
	box := image.Rect(20, 10, 60, 60)
	Paste(dst, src, box, Options{Feather: 0.3})

	for y := 0; y < dst.H; y++ {
		for x := 0; x < dst.W; x++ {
			if image.Pt(x, y).In(box) {
				continue
			}
			if r, g, b := dst.At(x, y); r != 50 || g != 50 || b != 50 {
				t.Fatalf("pixel %d,%d outside the box changed to %d,%d,%d", x, y, r, g, b)
			}
		}
	}
	if r, g, b := dst.At(40, 35); r != 250 || g != 10 || b != 10 {
		t.Errorf("centre = %d,%d,%d, want the pasted colour", r, g, b)
	}
	if r, _, _ := dst.At(20, 10); r != 50 {
		t.Errorf("box corner red = %d, want untouched (outside the ellipse)", r)
	}
	// Half-way through the feather the colour is between the two.
	if r, _, _ := dst.At(40, 10+4); r <= 60 || r >= 240 {
		t.Errorf("feathered edge red = %d, want a blend", r)
	}
}

func TestPasteMatchesColourToTheRegionItReplaces(t *testing.T) {
	dst := raster.New(80, 80)
	for i := range dst.Pix { // a textured, dark-green background
		dst.Pix[i] = []uint8{40, 120, 40}[i%3] + uint8((i/3)%7)
	}
	src := raster.New(40, 40)
	for i := range src.Pix { // a bright, high-contrast face
		src.Pix[i] = uint8(150 + 100*((i/3)%2))
	}
	box := image.Rect(20, 20, 60, 60)
	Paste(dst, src, box, Default)

	var sum [3]float64
	n := 0
	for y := 35; y < 45; y++ {
		for x := 35; x < 45; x++ {
			r, g, b := dst.At(x, y)
			sum[0], sum[1], sum[2] = sum[0]+float64(r), sum[1]+float64(g), sum[2]+float64(b)
			n++
		}
	}
	for c, want := range []float64{43, 123, 43} {
		if got := sum[c] / float64(n); math.Abs(got-want) > 12 {
			t.Errorf("channel %d mean in the core = %.1f, want about %.0f (the region's colour)", c, got, want)
		}
	}
}

func TestPasteClipsABoxThatLeavesTheFrame(t *testing.T) {
	dst := filled(50, 50, 0, 0, 0)
	Paste(dst, filled(10, 10, 255, 255, 255), image.Rect(30, 30, 70, 70), Options{Feather: 0.1})
	if r, _, _ := dst.At(49, 49); r == 0 {
		t.Error("the visible part of the box was not pasted")
	}
}

func TestEllipseIsOneInsideZeroOutside(t *testing.T) {
	m := Ellipse(21, 21, 0.2)
	if m[10*21+10] != 1 || m[0] != 0 || m[10*21] > 0.2 {
		t.Errorf("centre %.2f corner %.2f edge %.2f", m[10*21+10], m[0], m[10*21])
	}
}

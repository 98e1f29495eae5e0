package overlay

import (
	"image"
	"math/rand/v2"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

// movingFrames are random blocks that change every frame, with stamp drawn on top of each.
func movingFrames(n, w, h int, stamp func(*raster.Image)) []*raster.Image {
	rng := rand.New(rand.NewPCG(1, 2))
	var frames []*raster.Image
	for range n {
		f := raster.New(w, h)
		for by := 0; by < h; by += 8 {
			for bx := 0; bx < w; bx += 8 {
				v := uint8(rng.IntN(256))
				for y := by; y < min(by+8, h); y++ {
					for x := bx; x < min(bx+8, w); x++ {
						i := (y*w + x) * 3
						f.Pix[i], f.Pix[i+1], f.Pix[i+2] = v, v/2, 255-v
					}
				}
			}
		}
		if stamp != nil {
			stamp(f)
		}
		frames = append(frames, f)
	}
	return frames
}

func fill(f *raster.Image, r image.Rectangle, v uint8) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			i := (y*f.W + x) * 3
			f.Pix[i], f.Pix[i+1], f.Pix[i+2] = v, v, v
		}
	}
}

func TestFindsAStaticLogoOnMovingPicture(t *testing.T) {
	logo := image.Rect(230, 190, 300, 225)
	frames := movingFrames(12, 320, 240, func(f *raster.Image) {
		fill(f, logo, 255)
		fill(f, logo.Inset(8), 0)
	})
	boxes := Find(frames, Options{})
	if len(boxes) != 1 {
		t.Fatalf("boxes = %v, want one", boxes)
	}
	if !boxes[0].Inset(-1).In(logo.Inset(-8)) || !logo.Inset(2).In(boxes[0]) {
		t.Errorf("box = %v, want about %v", boxes[0], logo)
	}
}

func TestFindsNothingWhenEverythingMoves(t *testing.T) {
	if boxes := Find(movingFrames(12, 160, 120, nil), Options{}); len(boxes) != 0 {
		t.Errorf("boxes = %v, want none", boxes)
	}
}

func TestAStaticSceneIsNotAnOverlay(t *testing.T) {
	still := movingFrames(1, 160, 120, nil)[0]
	frames := []*raster.Image{still, still, still, still}
	if boxes := Find(frames, Options{}); len(boxes) != 0 {
		t.Errorf("boxes = %v, want none", boxes)
	}
}

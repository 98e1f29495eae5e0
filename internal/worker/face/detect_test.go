package face

import (
	"context"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/worker/testmedia"
)

// The real detector on a real portrait: this is what the worker runs in production.
func TestFacedetectFindsTheFaceInAPortrait(t *testing.T) {
	boxes, err := CLI{}.Detect(context.Background(), testmedia.FacePhotoPath(t))
	if err != nil {
		t.Fatalf("%v (apt-get install facedetect)", err)
	}
	b, ok := Biggest(boxes)
	// Grace Hopper's face is near the top centre of the 512x600 photo.
	if !ok || b.Dx() < 120 || b.Min.X < 80 || b.Max.X > 430 || b.Min.Y < 40 || b.Max.Y > 400 {
		t.Errorf("face = %v (found %v)", b, boxes)
	}
}

func TestFacedetectFindsNothingInAGradient(t *testing.T) {
	boxes, err := CLI{}.Detect(context.Background(), testmedia.FacelessImage(t, t.TempDir()))
	if err != nil || len(boxes) != 0 {
		t.Errorf("boxes = %v, %v", boxes, err)
	}
}

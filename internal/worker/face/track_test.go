package face

import (
	"image"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

func TestTrackInterpolatesBetweenSamplesAndHoldsOutside(t *testing.T) {
	tr := Track{Frames: 30, Samples: []Sample{
		{Frame: 10, Box: raster.Box{100, 50, 40, 40}},
		{Frame: 20, Box: raster.Box{120, 50, 60, 40}},
	}}
	cases := map[int]image.Rectangle{
		0:  image.Rect(100, 50, 140, 90),
		15: image.Rect(110, 50, 160, 90),
		29: image.Rect(120, 50, 180, 90),
	}
	for frame, want := range cases {
		if got, ok := tr.At(frame); !ok || got != want {
			t.Errorf("At(%d) = %v, want %v", frame, got, want)
		}
	}
	if _, ok := (Track{}).At(3); ok {
		t.Error("an empty track has a box")
	}
}

func TestTrackSurvivesTheAnalyzeOutputRoundTrip(t *testing.T) {
	tr := Track{Frames: 9, Samples: []Sample{{Frame: 8, Box: raster.Box{1, 2, 3, 4}}, {Frame: 0, Box: raster.Box{5, 6, 7, 8}}}}
	back, err := DecodeTrack(tr.Encode())
	if err != nil || back.Frames != 9 || back.Samples[0].Frame != 0 || back.Samples[1].Box != (raster.Box{1, 2, 3, 4}) {
		t.Fatalf("round trip = %+v, %v (samples must come back sorted)", back, err)
	}
}

func TestSmoothingTakesOutJitter(t *testing.T) {
	tr := Track{Samples: []Sample{
		{Frame: 0, Box: raster.Box{100, 50, 80, 80}},
		{Frame: 4, Box: raster.Box{106, 50, 74, 74}},
		{Frame: 8, Box: raster.Box{100, 50, 80, 80}},
	}}
	if got := tr.Smooth().Samples[1].Box; got != (raster.Box{102, 50, 78, 78}) {
		t.Errorf("smoothed middle box = %v", got)
	}
}

func TestParseBoxesReadsFacedetectOutput(t *testing.T) {
	boxes, err := parseBoxes([]byte("153 105 220 220\n10 20 30 40\n"))
	if err != nil || len(boxes) != 2 || boxes[0] != image.Rect(153, 105, 373, 325) {
		t.Fatalf("boxes = %v, %v", boxes, err)
	}
	if b, _ := Biggest(boxes); b != boxes[0] {
		t.Errorf("Biggest = %v", b)
	}
	if _, err := parseBoxes([]byte("1 2 3\n")); err == nil {
		t.Error("accepted a malformed line")
	}
}

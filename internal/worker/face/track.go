package face

import (
	"encoding/json"
	"image"
	"math"
	"sort"

	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

// Track is where a face is across a video: boxes found in sampled frames. It is what the
// analyze stage hands to render, JSON-encoded.
type Track struct {
	// Frames is the number of frames in the video.
	Frames  int      `json:"frames"`
	Samples []Sample `json:"samples"`
}

// Sample is the face found in one frame.
type Sample struct {
	Frame int        `json:"frame"`
	Box   raster.Box `json:"box"`
}

// At returns the face box in frame i: interpolated linearly between the samples around it,
// held at the first and last sample outside them.
func (t Track) At(i int) (image.Rectangle, bool) {
	s := t.Samples
	if len(s) == 0 {
		return image.Rectangle{}, false
	}
	k := sort.Search(len(s), func(k int) bool { return s[k].Frame >= i })
	switch {
	case k == 0:
		return s[0].Box.Rect(), true
	case k == len(s):
		return s[len(s)-1].Box.Rect(), true
	}
	a, b := s[k-1], s[k]
	f := float64(i-a.Frame) / float64(b.Frame-a.Frame)
	var out raster.Box
	for j := range out {
		out[j] = int(math.Round(float64(a.Box[j])*(1-f) + float64(b.Box[j])*f))
	}
	return out.Rect(), true
}

// Smooth averages each sample's box with its neighbours': a detector's box jitters by a few
// pixels from frame to frame, which would make the pasted face wobble.
func (t Track) Smooth() Track {
	out := Track{Frames: t.Frames, Samples: make([]Sample, len(t.Samples))}
	for i, s := range t.Samples {
		lo, hi := max(i-1, 0), min(i+1, len(t.Samples)-1)
		var sum [4]float64
		for _, n := range t.Samples[lo : hi+1] {
			for j := range sum {
				sum[j] += float64(n.Box[j])
			}
		}
		out.Samples[i].Frame = s.Frame
		for j := range sum {
			out.Samples[i].Box[j] = int(math.Round(sum[j] / float64(hi-lo+1)))
		}
	}
	return out
}

// Encode is the track as an analyze output value.
func (t Track) Encode() string {
	data, _ := json.Marshal(t)
	return string(data)
}

// DecodeTrack reads a track written by Encode.
func DecodeTrack(s string) (Track, error) {
	var t Track
	err := json.Unmarshal([]byte(s), &t)
	sort.Slice(t.Samples, func(i, j int) bool { return t.Samples[i].Frame < t.Samples[j].Frame })
	return t, err
}

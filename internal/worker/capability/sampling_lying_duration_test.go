package capability

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/worker/ffmpeg"
)

// lyingVideo is an MKV of frames frames whose Segment Duration says 40 ms: ffprobe reports
// that duration (and the true frame rate), while decoding it yields every frame. A caller
// makes one with any EBML editor; the file stays tiny (a few KB per thousand static frames).
func lyingVideo(t *testing.T, dir string, frames int) string {
	t.Helper()
	out := filepath.Join(dir, "lying.mkv")
	if err := (ffmpeg.Tools{}).Run(context.Background(), "-f", "lavfi", "-i", "color=c=gray:size=64x64:rate=25",
		"-frames:v", strconv.Itoa(frames), "-c:v", "libx264", "-preset", "ultrafast", "-g", "1000", out); err != nil {
		t.Fatalf("making the video: %v", err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// The Duration element: ID 0x4489, an 8-byte float (ms at the default TimecodeScale).
	i := bytes.Index(data, []byte{0x44, 0x89, 0x88})
	if i < 0 {
		t.Fatal("no 8-byte Duration element in the MKV")
	}
	binary.BigEndian.PutUint64(data[i+3:], math.Float64bits(40))
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// A video whose declared duration is far shorter than its
// frames makes the analyze stages keep every frame in memory.
//
// Input: a video.eraser source video or a ShortTemplate's target_url (both the caller's URLs)
// that is an MKV with a small Segment Duration and many frames. sample() spaces its n frames by
// a stride computed from the declared duration × frame rate (here 0.04 s × 25 = 1 frame, so a
// stride of 1), then keeps every frame ffmpeg decodes: all of them. Each is held as RGB at up
// to 960 pixels a side (1.5 MB at 960×540): 10,000 frames (a 200 KB file) are 15 GB. What the
// user (every user of that worker) sees: the worker is OOM-killed, every stage it ran is lost
// (resubmitted, or failed), and the same task does it again on resubmission. The 4K frame-size
// limit does not help: the frames are small, there are just many.
//
// Fixed: sample keeps at most twice the frames it asked for, and fails the stage with a clear
// message when the video has many more frames than it declares.
func TestAVideoLyingAboutItsDurationCannotMakeSamplingKeepEveryFrame(t *testing.T) {
	r := newRig(t)
	path := lyingVideo(t, r.media, 1000)
	info, err := r.p.d.Tools.Probe(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Frames() > 2 {
		t.Fatalf("the crafted video declares %d frames; want a lie of about 1", info.Frames())
	}
	smp, err := r.p.sample(context.Background(), path, info, shortSamples, detectMaxSide)
	if n := len(smp.frames); n > 2*shortSamples {
		t.Fatalf("sample kept %d frames in memory for %d samples asked", n, shortSamples)
	}
	if err == nil {
		t.Error("sampling a video with 1000 frames that declares 1 succeeded; want it refused")
	}
}

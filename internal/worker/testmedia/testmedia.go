// Package testmedia is for tests only: it makes small media files with ffmpeg and reads
// rendered results back, so tests assert on real pixels, durations and frame rates.
package testmedia

import (
	"context"
	"image"
	"path/filepath"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/portraits"
	"github.com/videogen-dev/videogen-operator/internal/worker/ffmpeg"
	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

// Size and rate of every test video: small, so the suite stays fast on two cores.
const (
	Width, Height = 320, 240
	Rate          = 15
)

// FacePhotoPath writes a real portrait (Grace Hopper, public domain; internal/portraits) into a
// temporary directory of the test and returns its path; OpenCV's Haar cascade finds her face.
func FacePhotoPath(t testing.TB) string {
	t.Helper()
	path, _, err := portraits.WriteTo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return path
}

var tools ffmpeg.Tools

func run(t testing.TB, args ...string) {
	t.Helper()
	if err := tools.Run(context.Background(), args...); err != nil {
		t.Fatalf("making test media: %v (apt-get install ffmpeg)", err)
	}
}

// MovingVideo is a scrolling test pattern with a sine tone, optionally with a video filter
// (e.g. drawbox) applied on top.
func MovingVideo(t testing.TB, dir string, seconds float64, filter string) string {
	t.Helper()
	out := filepath.Join(dir, "moving.mp4")
	vf := "scroll=h=0.01:v=0.007"
	if filter != "" {
		vf += "," + filter
	}
	run(t, "-f", "lavfi", "-i", lavfiSize("testsrc2", seconds), "-f", "lavfi", "-i", sine(seconds),
		"-vf", vf, "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", out)
	return out
}

// Watermark is where WatermarkedVideo draws its logo: a white frame around a black core.
var Watermark = image.Rect(230, 190, 300, 225)

// WatermarkedVideo is MovingVideo with a static logo at Watermark.
func WatermarkedVideo(t testing.TB, dir string, seconds float64) string {
	t.Helper()
	w := Watermark
	logo := "drawbox=x=" + itoa(w.Min.X) + ":y=" + itoa(w.Min.Y) + ":w=" + itoa(w.Dx()) + ":h=" + itoa(w.Dy()) + ":color=white:t=fill," +
		"drawbox=x=" + itoa(w.Min.X+8) + ":y=" + itoa(w.Min.Y+8) + ":w=" + itoa(w.Dx()-16) + ":h=" + itoa(w.Dy()-16) + ":color=black:t=fill"
	return MovingVideo(t, dir, seconds, logo)
}

// FaceVideo is a moving test pattern with FacePhotoPath's portrait, scaled to 180 px wide, drifting right
// by 10 px a second from (40, 20), and a sine tone.
func FaceVideo(t testing.TB, dir string, seconds float64) string {
	t.Helper()
	out := filepath.Join(dir, "face.mp4")
	run(t, "-f", "lavfi", "-i", lavfiSize("testsrc2", seconds), "-loop", "1", "-i", FacePhotoPath(t), "-f", "lavfi", "-i", sine(seconds),
		"-filter_complex", "[1:v]scale=180:-2[f];[0:v][f]overlay=x='40+10*t':y=20:shortest=1[v]",
		"-map", "[v]", "-map", "2:a", "-t", ftoa(seconds), "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac", out)
	return out
}

// OtherFace is FacePhotoPath's portrait mirrored and recoloured: a face the detector finds that is clearly
// different from the one in FaceVideo.
func OtherFace(t testing.TB, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "other-face.png")
	run(t, "-i", FacePhotoPath(t), "-vf", "hflip,hue=h=120:s=2,format=rgb24", "-frames:v", "1", out)
	return out
}

// FacelessImage is a plain gradient with no face in it.
func FacelessImage(t testing.TB, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "faceless.png")
	run(t, "-f", "lavfi", "-i", "gradients=s=320x240:d=1", "-frames:v", "1", "-pix_fmt", "rgb24", out)
	return out
}

// StillImage is a test pattern image, e.g. a pose template with no face.
func StillImage(t testing.TB, dir string, w, h int) string {
	t.Helper()
	out := filepath.Join(dir, "still.png")
	run(t, "-f", "lavfi", "-i", "testsrc2=s="+itoa(w)+"x"+itoa(h)+":d=1", "-frames:v", "1", "-pix_fmt", "rgb24", out)
	return out
}

// Probe reads a file's stream facts.
func Probe(t testing.TB, path string) ffmpeg.Info {
	t.Helper()
	info, err := tools.Probe(context.Background(), path)
	if err != nil {
		t.Fatalf("probing %s: %v", path, err)
	}
	return info
}

// Frames decodes every frame of a video at its own size.
func Frames(t testing.TB, path string) []*raster.Image {
	t.Helper()
	info := Probe(t, path)
	var frames []*raster.Image
	err := tools.Decode(context.Background(), path, info.Width, info.Height, "", func(_ int, f *raster.Image) error {
		frames = append(frames, f)
		return nil
	})
	if err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	return frames
}

func lavfiSize(src string, seconds float64) string {
	return src + "=s=" + itoa(Width) + "x" + itoa(Height) + ":r=" + itoa(Rate) + ":d=" + ftoa(seconds)
}

func sine(seconds float64) string { return "sine=f=440:d=" + ftoa(seconds) }

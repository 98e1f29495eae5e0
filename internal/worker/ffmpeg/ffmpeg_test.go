package ffmpeg

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

func testVideo(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "in.mp4")
	err := Tools{}.Run(context.Background(), "-f", "lavfi", "-i", "testsrc2=s=160x120:r=15:d=2", "-f", "lavfi", "-i", "sine=d=2",
		"-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", out)
	if err != nil {
		t.Fatalf("%v (apt-get install ffmpeg)", err)
	}
	return out
}

func TestProbeReadsSizeRateDurationAndSound(t *testing.T) {
	info, err := Tools{}.Probe(context.Background(), testVideo(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.Width != 160 || info.Height != 120 || info.FrameRate != "15/1" || info.FPS != 15 || info.Duration < 1.9 || info.Duration > 2.1 || !info.HasAudio || info.Frames() != 30 {
		t.Errorf("info = %+v", info)
	}
}

func TestProbeRefusesWhatIsNotAVideo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.mp4")
	os.WriteFile(path, []byte("<html>not a video</html>"), 0o644)
	if _, err := (Tools{}).Probe(context.Background(), path); !errors.Is(err, ErrNoVideo) {
		t.Errorf("err = %v, want ErrNoVideo", err)
	}
}

func TestDecodeThenEncodeKeepsFramesAndSound(t *testing.T) {
	in := testVideo(t)
	out := filepath.Join(t.TempDir(), "out.mp4")
	ctx := context.Background()
	enc, err := Tools{}.NewEncoder(ctx, out, EncodeOptions{Width: 160, Height: 120, FrameRate: "15/1", AudioFrom: in})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := (Tools{}).Decode(ctx, in, 160, 120, "", func(_ int, f *raster.Image) error { n++; return enc.Write(f) }); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := Tools{}.Probe(ctx, out)
	if err != nil || n != 30 || info.Frames() != 30 || !info.HasAudio || info.Width != 160 {
		t.Errorf("decoded %d frames; output %+v, %v", n, info, err)
	}
}

func TestEveryNthKeepsEveryNthFrame(t *testing.T) {
	var got []int
	err := Tools{}.Decode(context.Background(), testVideo(t), 80, 60, EveryNth(10), func(i int, _ *raster.Image) error {
		got = append(got, i)
		return nil
	})
	if err != nil || len(got) != 3 {
		t.Errorf("frames %v, %v; want 3 of 30", got, err)
	}
}

func TestCancellingTheContextKillsFFmpeg(t *testing.T) {
	in := testVideo(t)
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	err := Tools{}.Decode(ctx, in, 160, 120, "", func(i int, _ *raster.Image) error {
		if i == 1 {
			cancel()
			time.Sleep(50 * time.Millisecond) // let ffmpeg be killed while it is still writing
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Errorf("err = %v after %s, want context.Canceled at once", err, time.Since(start))
	}
}

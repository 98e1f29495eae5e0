package ffmpeg

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"

	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

// Decode streams the frames of the video at path to fn as w×h RGB images. filter, if not empty,
// is an ffmpeg video filter applied before scaling (e.g. a frame selection); the frame index
// passed to fn counts the frames that come out.
func (t Tools) Decode(ctx context.Context, path string, w, h int, filter string, fn func(i int, frame *raster.Image) error) error {
	vf := fmt.Sprintf("scale=%d:%d:flags=bilinear", w, h)
	if filter != "" {
		vf = filter + "," + vf
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops ffmpeg when fn fails early
	cmd := exec.CommandContext(ctx, t.ffmpeg(), "-hide_banner", "-nostdin", "-v", "error", "-format_whitelist", VideoFormats, "-i", path,
		"-an", "-sn", "-vf", vf, "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", "-")
	var stderr tailBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	rd := bufio.NewReaderSize(stdout, 1<<20)
	var fnErr, readErr error
	for i := 0; ; i++ {
		frame := raster.New(w, h)
		if _, err := io.ReadFull(rd, frame.Pix); err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = fmt.Errorf("decoding frame %d: %w", i, err)
			}
			break
		}
		if fnErr = fn(i, frame); fnErr != nil {
			cancel()
			break
		}
	}
	_, _ = io.Copy(io.Discard, rd)
	waitErr := cmd.Wait()
	switch {
	case fnErr != nil:
		return fnErr
	case parent.Err() != nil:
		return parent.Err() // cancelled: a cut-off frame or a killed ffmpeg is the consequence, not the cause
	case waitErr != nil:
		return commandError("ffmpeg", ctx, waitErr, &stderr)
	}
	return readErr
}

// EveryNth is a Decode filter that keeps frames 0, n, 2n, ….
func EveryNth(n int) string {
	return "select=not(mod(n\\," + strconv.Itoa(max(n, 1)) + "))"
}

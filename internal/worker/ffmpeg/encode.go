package ffmpeg

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"

	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

// Encoder writes Go frames into an H.264 MP4 through ffmpeg's stdin.
type Encoder struct {
	ctx    context.Context
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	buf    *bufio.Writer
	stderr tailBuffer
	w, h   int
	waited bool
	err    error // ffmpeg's exit, once waited for
}

// EncodeOptions describe the output.
type EncodeOptions struct {
	Width, Height int
	// FrameRate as "num/den".
	FrameRate string
	// AudioFrom, if set, is a media file whose first audio stream (if any) is kept.
	AudioFrom string
}

// NewEncoder starts ffmpeg writing to out.
func (t Tools) NewEncoder(ctx context.Context, out string, o EncodeOptions) (*Encoder, error) {
	args := []string{"-hide_banner", "-nostdin", "-v", "error", "-y",
		"-f", "rawvideo", "-pix_fmt", "rgb24", "-s", fmt.Sprintf("%dx%d", o.Width, o.Height), "-framerate", o.FrameRate, "-i", "-"}
	if o.AudioFrom != "" {
		args = append(args, "-i", o.AudioFrom, "-map", "0:v:0", "-map", "1:a:0?", "-c:a", "aac", "-b:a", "128k", "-shortest")
	}
	args = append(args, H264Args("")...)
	args = append(args, out)
	e := &Encoder{ctx: ctx, w: o.Width, h: o.Height}
	e.cmd = exec.CommandContext(ctx, t.ffmpeg(), args...)
	e.cmd.Stderr = &e.stderr
	var err error
	if e.stdin, err = e.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := e.cmd.Start(); err != nil {
		return nil, err
	}
	e.buf = bufio.NewWriterSize(e.stdin, 1<<20)
	return e, nil
}

// H264Args are the output options every video the worker writes uses, after the video filter
// chain filter (may be empty): H.264 in yuv420p, which every player accepts, padded to the even
// dimensions yuv420p requires, with the index up front so playback starts before the download ends.
func H264Args(filter string) []string {
	vf := "pad=ceil(iw/2)*2:ceil(ih/2)*2"
	if filter != "" {
		vf = filter + "," + vf
	}
	return []string{"-vf", vf, "-c:v", "libx264", "-preset", "veryfast", "-crf", "20",
		"-pix_fmt", "yuv420p", "-movflags", "+faststart"}
}

// Write appends one frame.
func (e *Encoder) Write(frame *raster.Image) error {
	if frame.W != e.w || frame.H != e.h {
		return fmt.Errorf("frame is %dx%d, the encoder expects %dx%d", frame.W, frame.H, e.w, e.h)
	}
	if _, err := e.buf.Write(frame.Pix); err != nil {
		return e.fail(err)
	}
	return nil
}

// Close ends the stream and waits for ffmpeg to finish the file.
func (e *Encoder) Close() error {
	if e.waited {
		return e.err
	}
	err := e.buf.Flush()
	if cerr := e.stdin.Close(); err == nil {
		err = cerr
	}
	if werr := e.wait(); werr != nil {
		return werr
	}
	return err
}

// fail explains a broken pipe with ffmpeg's own reason.
func (e *Encoder) fail(err error) error {
	_ = e.stdin.Close()
	if werr := e.wait(); werr != nil {
		return werr
	}
	return err
}

// wait reaps ffmpeg once and remembers how it ended.
func (e *Encoder) wait() error {
	if !e.waited {
		e.waited = true
		if werr := e.cmd.Wait(); werr != nil {
			e.err = commandError("ffmpeg", e.ctx, werr, &e.stderr)
		}
	}
	return e.err
}

// Package ffmpeg runs the ffmpeg and ffprobe command-line tools (Debian's ffmpeg package):
// probing media, decoding frames into Go as raw RGB, and encoding Go frames into H.264 MP4.
// Every command runs under the caller's context, so cancelling a stage kills its ffmpeg.
package ffmpeg

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Tools names the binaries; the zero value finds them on PATH.
type Tools struct {
	FFmpeg, FFprobe string
}

func (t Tools) ffmpeg() string  { return or(t.FFmpeg, "ffmpeg") }
func (t Tools) ffprobe() string { return or(t.FFprobe, "ffprobe") }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Run runs ffmpeg with args and returns the tail of its log if it fails.
func (t Tools) Run(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, t.ffmpeg(), append([]string{"-hide_banner", "-nostdin", "-v", "error", "-y"}, args...)...)
	var stderr tailBuffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return commandError("ffmpeg", ctx, err, &stderr)
	}
	return nil
}

// commandError explains a failed command with the end of its log, or the cancellation.
func commandError(name string, ctx context.Context, err error, log *tailBuffer) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if msg := strings.TrimSpace(log.String()); msg != "" {
		return fmt.Errorf("%s failed: %s", name, msg)
	}
	return fmt.Errorf("%s failed: %w", name, err)
}

// tailBuffer keeps the last few KiB written to it: enough for ffmpeg's error, not its chatter.
type tailBuffer struct{ bytes.Buffer }

const tailSize = 2048

func (b *tailBuffer) Write(p []byte) (int, error) {
	n, _ := b.Buffer.Write(p)
	if over := b.Len() - tailSize; over > 0 {
		b.Next(over)
	}
	return n, nil
}

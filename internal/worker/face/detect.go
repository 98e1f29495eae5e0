// Package face finds faces: a Detector returns face boxes in an image file, and a Track holds
// the boxes found in sampled frames of a video and interpolates them for every frame.
package face

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"os/exec"
	"strconv"
	"strings"
)

// Detector finds faces in an image file.
type Detector interface {
	Detect(ctx context.Context, imagePath string) ([]image.Rectangle, error)
}

// CLI detects faces with Debian's facedetect command (OpenCV Haar cascades), which prints
// "x y w h" per face.
type CLI struct {
	// Path of the command; "facedetect" on PATH if empty.
	Path string
	// DataDir holds OpenCV's haarcascades directory; facedetect's default if empty.
	DataDir string
}

// Detect implements Detector. It asks for the biggest face only: the cascade then stops early,
// and the biggest face is the one the worker places or replaces.
func (c CLI) Detect(ctx context.Context, imagePath string) ([]image.Rectangle, error) {
	bin := c.Path
	if bin == "" {
		bin = "facedetect"
	}
	args := []string{"--biggest"}
	if c.DataDir != "" {
		args = append(args, "--data-dir", c.DataDir)
	}
	cmd := exec.CommandContext(ctx, bin, append(args, imagePath)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("face detection failed: %v: %s", err, lastLine(stderr.String()))
	}
	return parseBoxes(out)
}

func parseBoxes(out []byte) ([]image.Rectangle, error) {
	var boxes []image.Rectangle
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 4 {
			return nil, fmt.Errorf("face detection printed %q, want \"x y w h\"", sc.Text())
		}
		var v [4]int
		for i, s := range f {
			n, err := strconv.Atoi(s)
			if err != nil {
				return nil, fmt.Errorf("face detection printed %q, want \"x y w h\"", sc.Text())
			}
			v[i] = n
		}
		boxes = append(boxes, image.Rect(v[0], v[1], v[0]+v[2], v[1]+v[3]))
	}
	return boxes, sc.Err()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// ErrNoFace: no face was found where one is needed.
var ErrNoFace = errors.New("no face found")

// Biggest returns the largest box.
func Biggest(boxes []image.Rectangle) (image.Rectangle, bool) {
	var best image.Rectangle
	for _, b := range boxes {
		if b.Dx()*b.Dy() > best.Dx()*best.Dy() {
			best = b
		}
	}
	return best, !best.Empty()
}

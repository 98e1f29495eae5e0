package capability

import (
	"context"
	"fmt"
	"image"

	"github.com/videogen-dev/videogen-operator/internal/worker/face"
)

// noFaceInPhoto is the message a caller sees when their photo cannot be used.
const noFaceInPhoto = "no face found in the face image: use a well-lit, frontal photo of one face"

// detectFace returns the biggest face in an image file, or ok=false if there is none.
func (p *Pipelines) detectFace(ctx context.Context, path string) (image.Rectangle, bool, error) {
	boxes, err := p.d.Faces.Detect(ctx, path)
	if err != nil {
		return image.Rectangle{}, false, err
	}
	r, ok := face.Biggest(boxes)
	return r, ok, nil
}

// callerFace finds the face in the caller's photo; without one, the stage cannot run.
func (p *Pipelines) callerFace(ctx context.Context, path string) (image.Rectangle, error) {
	r, ok, err := p.detectFace(ctx, path)
	if err != nil {
		return image.Rectangle{}, fmt.Errorf("detecting the face in the face image: %w", err)
	}
	if !ok {
		return image.Rectangle{}, fmt.Errorf("%w: %s", face.ErrNoFace, noFaceInPhoto)
	}
	return r, nil
}

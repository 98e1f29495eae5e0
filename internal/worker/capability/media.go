package capability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/imageinput"
	"github.com/videogen-dev/videogen-operator/internal/worker/fetcher"
	"github.com/videogen-dev/videogen-operator/internal/worker/ffmpeg"
	"github.com/videogen-dev/videogen-operator/internal/worker/raster"
)

// scratch is a stage's private directory, and the blobs it stored.
type scratch struct {
	dir string
	// stored names every blob a Put was tried for, landed or not: what discarding the stage's
	// result deletes.
	stored []string
}

func (s *scratch) path(name string) string { return filepath.Join(s.dir, name) }

// origin says whose an input's URL is, which decides whether a failure to fetch it may name it.
type origin int

const (
	// givenByCaller: the caller gave the URL, and is told it back.
	givenByCaller origin = iota
	// uploadedByCaller: the caller sent the input inline; the URL is the service's own copy.
	uploadedByCaller
	// ofTemplate: an official Template's media, which the service's administrators set: it may
	// be an address of the service's network, so it is never named to the task's caller.
	ofTemplate
	// ofAccountTemplate: the media of a template the caller's account made (a ShortTemplate's
	// target_url), a URL of the caller's like givenByCaller, told without it like ofTemplate (a
	// manager older than template_media_official says so of official ones too).
	ofAccountTemplate
)

// serviceOwned reports whether an input of this origin is the service's own media, which may be
// fetched from the private addresses Deps.ServiceFetcher allows: any other URL is the caller's,
// and reaching the service's network through it would let a tenant probe that network.
func (o origin) serviceOwned() bool { return o == uploadedByCaller || o == ofTemplate }

// faceOrigin is where the request's face image comes from.
func faceOrigin(req protocol.StageRequest) origin {
	if req.Inputs.FaceImageUploaded {
		return uploadedByCaller
	}
	return givenByCaller
}

// templateOrigin is whose the request's template media is.
func templateOrigin(req protocol.StageRequest) origin {
	if req.TemplateMediaOfficial {
		return ofTemplate
	}
	return ofAccountTemplate
}

// fetchVideo downloads a video and probes it; what describes the input in messages.
func (p *Pipelines) fetchVideo(ctx context.Context, s *scratch, what, url string, from origin, name string) (string, ffmpeg.Info, error) {
	path := s.path(name)
	if err := p.download(ctx, what, url, from, path); err != nil {
		return "", ffmpeg.Info{}, err
	}
	info, err := p.d.Tools.Probe(ctx, path)
	if err != nil {
		return "", ffmpeg.Info{}, fmt.Errorf("the %s is not a usable video: %w", what, err)
	}
	if info.Width > maxVideoSide || info.Height > maxVideoSide || info.Width*info.Height > maxVideoPixels {
		return "", ffmpeg.Info{}, fmt.Errorf("the %s is %dx%d: videos of at most %d pixels a side and %d×%d pixels in all are accepted",
			what, info.Width, info.Height, maxVideoSide, 4096, 2160)
	}
	return path, info, nil
}

// maxVideoSide and maxVideoPixels bound a video's frame (4K): some pipelines decode every frame
// at full size, and a small, highly compressible file of huge frames would otherwise take the
// worker's memory, and every stage it runs with it.
const (
	maxVideoSide   = 4096
	maxVideoPixels = 4096 * 2160
)

// fetchImage downloads an image, checks it against imageinput's limits (a decompression bomb
// is refused before it is decoded) and decodes it.
func (p *Pipelines) fetchImage(ctx context.Context, s *scratch, what, url string, from origin, name string) (string, *raster.Image, error) {
	path := s.path(name)
	if err := p.download(ctx, what, url, from, path); err != nil {
		return "", nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	if _, err := imageinput.Check(data, imageinput.DefaultLimits); err != nil {
		return "", nil, fmt.Errorf("the %s: %w", what, err)
	}
	img, err := raster.Load(path)
	if err != nil {
		return "", nil, fmt.Errorf("the %s: %w", what, err)
	}
	return path, img, nil
}

// download fetches url into path; what describes the input in messages, from says whether
// they may name url.
func (p *Pipelines) download(ctx context.Context, what, url string, from origin, path string) error {
	fetch := p.d.Fetcher
	if from.serviceOwned() {
		fetch = p.d.ServiceFetcher
	}
	err := fetch.ToFile(ctx, url, path)
	switch {
	case err == nil:
		return nil
	case from == uploadedByCaller:
		return &unnamedError{err: err, msg: "the " + what + " you uploaded could not be read back from the service's storage" +
			cause(err) + "; the fault is the service's, not your image's: submit the task again"}
	case from == ofTemplate || from == ofAccountTemplate:
		return &unnamedError{err: err, msg: "the " + what + " could not be fetched" + cause(err)}
	}
	return fmt.Errorf("the %s could not be fetched: %w", what, err)
}

// cause is " (what failed)" for a fetch error, without its URL: its message names no address
// of ours. It is "" for any other error.
func cause(err error) string {
	var fe *fetcher.Error
	if !errors.As(err, &fe) {
		return ""
	}
	msg := " (" + fe.Err.Error()
	if fe.Attempts > 1 {
		msg += fmt.Sprintf(", tried %d times", fe.Attempts)
	}
	return msg + ")"
}

// unnamedError is a failed fetch told to the task's caller without its URL (see origin);
// Detail keeps the URL, and any address, for the worker's log.
type unnamedError struct {
	msg string
	err error
}

func (e *unnamedError) Error() string { return e.msg }

func (e *unnamedError) Unwrap() error { return e.err }

// Detail is the whole failure, with the URL and any address: for the log only.
func (e *unnamedError) Detail() string {
	var detailed interface{ Detail() string }
	if errors.As(e.err, &detailed) {
		return e.err.Error() + ": " + detailed.Detail()
	}
	return e.err.Error()
}

// publish stores a finished file and describes it as the stage's result.
func (p *Pipelines) publish(ctx context.Context, s *scratch, path, mediaType string, metadata map[string]string) (*protocol.Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	name := blobstore.NewName(mediaType)
	// Recorded before the Put: one that fails may still have landed (S3 committed the object
	// and the stage's context ended before the answer was read).
	s.stored = append(s.stored, name)
	url, err := p.d.Store.Put(ctx, name, mediaType, data)
	if err != nil {
		return nil, fmt.Errorf("storing the result: %w", err)
	}
	return &protocol.Result{URL: url, MediaType: mediaType, Metadata: metadata}, nil
}

// publishVideo probes the rendered video so the metadata says what was really produced.
func (p *Pipelines) publishVideo(ctx context.Context, s *scratch, path string) (*protocol.Result, error) {
	info, err := p.d.Tools.Probe(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("the rendered video is unreadable: %w", err)
	}
	return p.publish(ctx, s, path, "video/mp4", videoMetadata(info))
}

// discardTimeout bounds deleting a stage's blobs, which runs after the stage's context ended.
const discardTimeout = 30 * time.Second

// discard deletes the blobs names a stage stored, for a result no caller will read. It is best
// effort: a blob it cannot delete is logged by nobody and left, as before.
func (p *Pipelines) discard(ctx context.Context, names []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
	defer cancel()
	for _, name := range names {
		_ = p.d.Store.Delete(ctx, name)
	}
}

func videoMetadata(info ffmpeg.Info) map[string]string {
	return map[string]string{
		"width":     strconv.Itoa(info.Width),
		"height":    strconv.Itoa(info.Height),
		"fps":       strconv.FormatFloat(math.Round(info.FPS*1000)/1000, 'f', -1, 64),
		"duration":  strconv.FormatFloat(math.Round(info.Duration*1000)/1000, 'f', -1, 64),
		"has_audio": strconv.FormatBool(info.HasAudio),
	}
}

// progress maps done/total onto the range [from, to] of a stage's percent.
func progress(report func(int, string), from, to, done, total int, message string) {
	if total <= 0 {
		return
	}
	report(from+(to-from)*done/total, message)
}

func encodeJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// decodePrevious reads an analyze output; its absence means render was sent without analyze.
func decodePrevious(prev map[string]string, key string, v any) error {
	s, ok := prev[key]
	if !ok {
		return invalid("previous.%s is required: send the analyze stage's outputs to render", key)
	}
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return invalid("previous.%s is not what analyze produced: %v", key, err)
	}
	return nil
}

package localstack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/videogen-dev/videogen-operator/internal/portraits"
)

// Placeholders in the recipes for the two public-domain portraits (internal/portraits): the
// templates are made from one person, and the demo face is another, so a face swap shows.
const (
	templatePortrait = "{template-portrait}"
	facePortrait     = "{face-portrait}"
)

type demoMedia struct {
	portrait, portraitCover, face, countdown, countdownCover, watermarked, poseImage string
}

// The demo media's ffmpeg filters: the face photo fitted to 320x240, and a white watermark.
const (
	demoFit       = "scale=320:240:force_original_aspect_ratio=decrease,pad=320:240:(ow-iw)/2:(oh-ih)/2,setsar=1"
	demoWatermark = "drawbox=x=230:y=190:w=70:h=35:color=white:t=fill,drawbox=x=238:y=198:w=54:h=19:color=black:t=fill"
)

// demoRecipes are the demo media, in the order of demoMedia's fields: a name (its blob name is
// DemoBlobName(name)) and the ffmpeg arguments that render it.
var demoRecipes = []struct {
	name string
	args []string
}{
	{"portrait.mp4", []string{"-loop", "1", "-framerate", "15", "-i", templatePortrait, "-f", "lavfi", "-i", "sine=frequency=440:duration=3",
		"-vf", demoFit + ",zoompan=z='1+0.0015*on':d=1:s=320x240:fps=15", "-t", "3",
		"-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest"}},
	{"portrait-cover.jpg", []string{"-i", templatePortrait, "-vf", demoFit, "-frames:v", "1"}},
	{"face-eileen-collins.jpg", []string{"-i", facePortrait, "-frames:v", "1"}},
	{"countdown.mp4", []string{"-f", "lavfi", "-i", "testsrc2=size=320x240:rate=15:duration=4", "-f", "lavfi", "-i", "sine=frequency=330:duration=4",
		"-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest"}},
	{"countdown-cover.png", []string{"-f", "lavfi", "-i", "testsrc2=size=320x240:rate=1:duration=1", "-frames:v", "1"}},
	{"watermarked.mp4", []string{"-f", "lavfi", "-i", "testsrc2=size=320x240:rate=15:duration=3", "-f", "lavfi", "-i", "sine=frequency=550:duration=3",
		"-vf", "scroll=h=0.01:v=0.007," + demoWatermark, "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest"}},
	{"pose.png", []string{"-i", templatePortrait, "-vf", "scale=320:-2", "-frames:v", "1"}},
}

// DemoMedia lists the demo media recipes by name.
func DemoMedia() []string {
	names := make([]string, len(demoRecipes))
	for i, r := range demoRecipes {
		names[i] = r.name
	}
	return names
}

// DemoBlobName is the blob name of a demo media recipe: 32 hex digits derived from the recipe,
// so reruns find the files, and config/e2e/make-demo-media.sh (the kind cluster's copy of the
// recipes) writes the same names.
func DemoBlobName(recipe string) string {
	sum := sha256.Sum256([]byte("localstack-v1/" + recipe))
	return hex.EncodeToString(sum[:16]) + filepath.Ext(recipe)
}

// makeMedia renders the demo media with ffmpeg into the worker's blob directory (once), so the
// worker serves them like any other blob and the demo needs nothing from the internet.
func (s *Stack) makeMedia(ctx context.Context) (demoMedia, error) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		return demoMedia{}, fmt.Errorf("ffmpeg is missing: apt-get install ffmpeg")
	}
	template, face, err := portraits.WriteTo(s.path("portraits"))
	if err != nil {
		return demoMedia{}, err
	}
	dir := s.path("worker-blobs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return demoMedia{}, err
	}
	var m demoMedia
	targets := []*string{&m.portrait, &m.portraitCover, &m.face, &m.countdown, &m.countdownCover, &m.watermarked, &m.poseImage}
	for i, r := range demoRecipes {
		name := DemoBlobName(r.name)
		out := filepath.Join(dir, name)
		if _, err := os.Stat(out); err != nil {
			tmp := filepath.Join(dir, ".tmp-"+r.name)
			args := slices.Clone(r.args)
			for j, a := range args {
				switch a {
				case templatePortrait:
					args[j] = template
				case facePortrait:
					args[j] = face
				}
			}
			args = append(append([]string{"-hide_banner", "-loglevel", "error", "-y"}, args...), tmp)
			if b, err := exec.CommandContext(ctx, "ffmpeg", args...).CombinedOutput(); err != nil {
				return demoMedia{}, fmt.Errorf("making demo media %s: %v\n%s", r.name, err, b)
			}
			if err := os.Rename(tmp, out); err != nil {
				return demoMedia{}, err
			}
		}
		*targets[i] = s.WorkerURL + "/v1/blobs/" + name
	}
	return m, nil
}

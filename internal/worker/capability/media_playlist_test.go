package capability

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/worker/ffmpeg"
)

// A caller's "video" that is an HLS playlist makes ffmpeg
// read files of the worker's own disk.
//
// Input: a video.eraser source_video_url (or a ShortTemplate's target_url) that serves a text
// file "#EXTM3U … /var/lib/videogen/worker-blobs/<name>.mp4 …". The fetcher stores it as
// "source"; ffprobe and ffmpeg pick their demuxer by content, so it is read as a playlist whose
// segments are local paths. Debian's ffmpeg refuses data: segments and segments without a media
// extension, but a local file that has one (another stage's out.mp4 in its scratch directory,
// a result in the worker's blob directory, a mounted volume's media) is read, and ends up in
// the caller's result video; a playlist without #EXT-X-ENDLIST is "live" and holds ffmpeg,
// and the worker's slot, reloading it until the stage's deadline (hours). The fetch timeout
// and size limit do not help: the download is a few bytes. What the user sees: nothing; the
// attacker gets another file's frames, or other tenants wait behind a stuck slot.
//
// Fixed: Probe and Decode accept only container formats of video files (format_whitelist):
// a playlist, a concat script or any other indirection is "not a usable video".
func TestAPlaylistIsNotAVideoAndReadsNoLocalFile(t *testing.T) {
	r := newRig(t)
	// A file of the worker's disk, outside the stage's scratch directory, with a media extension.
	secret := filepath.Join(t.TempDir(), "other-tenant.ts")
	if err := (ffmpeg.Tools{}).Run(context.Background(), "-f", "lavfi", "-i", "testsrc=size=64x64:rate=5",
		"-t", "1", "-c:v", "mpeg2video", "-f", "mpegts", secret); err != nil {
		t.Fatal(err)
	}
	playlist := filepath.Join(r.media, "video.mp4")
	body := "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\n" + secret + "\n#EXT-X-ENDLIST\n"
	if err := os.WriteFile(playlist, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &scratch{dir: t.TempDir()}
	_, info, err := r.p.fetchVideo(context.Background(), s, "source video", r.serve(playlist), givenByCaller, "source")
	if err == nil {
		t.Fatalf("a playlist pointing at %s was probed as a %dx%d video: ffmpeg reads local files for the caller", secret, info.Width, info.Height)
	}
}

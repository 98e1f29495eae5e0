package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/worker/testmedia"
)

// jobPod is what a Job backend's pod gives `worker job`: the VIDEOGEN_* environment
// (docs/job-backend.md) and a termination-log file the test reads as the kubelet would.
type jobPod struct {
	env            map[string]string
	blobs, termLog string
	publicURL      string
}

func newJobPod(t *testing.T, capability string) *jobPod {
	t.Helper()
	return &jobPod{
		env: map[string]string{
			"VIDEOGEN_NAMESPACE": "acme", "VIDEOGEN_TASK": "vt-1", "VIDEOGEN_TASK_UID": "0b0e-uid",
			"VIDEOGEN_CAPABILITY": capability, "VIDEOGEN_PREVIOUS": "{}",
		},
		blobs:     t.TempDir(),
		termLog:   filepath.Join(t.TempDir(), "termination-log"),
		publicURL: "http://videogen-worker.videogen-system.svc:8080",
	}
}

// run runs one stage and returns the exit code and the termination message.
func (p *jobPod) run(t *testing.T, stage string) (int, string) {
	t.Helper()
	p.env["VIDEOGEN_STAGE"] = stage
	var logs bytes.Buffer
	code := runJob([]string{"--blob-dir", p.blobs, "--public-url", p.publicURL, "--allow-private-urls", "127.0.0.0/8",
		"--termination-log", p.termLog}, func(k string) string { return p.env[k] }, &logs)
	msg, err := os.ReadFile(p.termLog)
	if err != nil {
		t.Fatalf("no termination message (exit %d): %v; logs:\n%s", code, err, logs.String())
	}
	if len(msg) > 4096 {
		t.Errorf("termination message of %d bytes: the kubelet keeps 4096", len(msg))
	}
	return code, string(msg)
}

// serveMedia serves dir's files as the cluster would serve inputs.
func serveMedia(t *testing.T, dir string) string {
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestJobRunsBothStagesFromTheJobBackendsEnvironment(t *testing.T) {
	media := t.TempDir()
	base := serveMedia(t, media)
	pod := newJobPod(t, "video.eraser")
	pod.env["VIDEOGEN_SOURCE_VIDEO_URL"] = base + "/" + filepath.Base(testmedia.WatermarkedVideo(t, media, 2))

	code, msg := pod.run(t, "analyze")
	if code != exitOK {
		t.Fatalf("analyze exited %d: %s", code, msg)
	}
	var analyzed struct{ Outputs map[string]string }
	if err := json.Unmarshal([]byte(msg), &analyzed); err != nil || analyzed.Outputs == nil {
		t.Fatalf("analyze message %q is not {\"outputs\": {...}}: %v", msg, err)
	}

	previous, _ := json.Marshal(analyzed.Outputs)
	pod.env["VIDEOGEN_PREVIOUS"] = string(previous)
	code, msg = pod.run(t, "render")
	if code != exitOK {
		t.Fatalf("render exited %d: %s", code, msg)
	}
	var rendered struct {
		Result struct {
			URL       string            `json:"url"`
			MediaType string            `json:"media_type"`
			Metadata  map[string]string `json:"metadata"`
		}
	}
	if err := json.Unmarshal([]byte(msg), &rendered); err != nil {
		t.Fatalf("render message %q: %v", msg, err)
	}
	// The result is in the blob directory, under the URL the worker Deployment serves it at.
	name, ok := strings.CutPrefix(rendered.Result.URL, pod.publicURL+"/v1/blobs/")
	if !ok || rendered.Result.MediaType != "video/mp4" {
		t.Fatalf("result %+v: want a video/mp4 under %s/v1/blobs/", rendered.Result, pod.publicURL)
	}
	info := testmedia.Probe(t, filepath.Join(pod.blobs, name))
	if info.Width != testmedia.Width || !info.HasAudio || rendered.Result.Metadata["overlays_removed"] != "1" {
		t.Errorf("result %+v, probe %+v", rendered.Result, info)
	}
}

func TestJobAnalyzeOfAFaceSwapFitsTheTerminationMessage(t *testing.T) {
	media := t.TempDir()
	base := serveMedia(t, media)
	pod := newJobPod(t, "video.short")
	pod.env["VIDEOGEN_TEMPLATE_MEDIA_URL"] = base + "/" + filepath.Base(testmedia.FaceVideo(t, media, 2))
	pod.env["VIDEOGEN_FACE_IMAGE_URL"] = base + "/" + filepath.Base(testmedia.OtherFace(t, media))
	if code, msg := pod.run(t, "analyze"); code != exitOK || !strings.HasPrefix(msg, `{"outputs":`) {
		t.Fatalf("analyze exited %d: %s", code, msg)
	}
}

func TestJobExitCodesTellTheJobWhetherToRetry(t *testing.T) {
	for name, tc := range map[string]struct {
		env      map[string]string
		wantCode int
		wantMsg  string
	}{
		"no stage in the environment":  {map[string]string{"VIDEOGEN_STAGE": ""}, exitInvalidInput, "VIDEOGEN_STAGE is not set"},
		"an unknown capability":        {map[string]string{"VIDEOGEN_CAPABILITY": "video.nope"}, exitInvalidInput, "video.nope"},
		"a missing input":              {nil, exitInvalidInput, "source"},
		"a duration that is no number": {map[string]string{"VIDEOGEN_DURATION": "5.5"}, exitInvalidInput, "integer"},
		"an input that cannot be fetched": {map[string]string{"VIDEOGEN_SOURCE_VIDEO_URL": "http://127.0.0.1:1/gone.mp4"},
			exitFailed, "127.0.0.1"},
	} {
		t.Run(name, func(t *testing.T) {
			pod := newJobPod(t, "video.eraser")
			pod.env["VIDEOGEN_STAGE"] = "analyze"
			for k, v := range tc.env {
				pod.env[k] = v
			}
			// A refused connection is tried again: the fetch timeout keeps that short.
			code := runJob([]string{"--blob-dir", pod.blobs, "--allow-private-urls", "127.0.0.0/8", "--termination-log", pod.termLog, "--fetch-timeout", "2s"},
				func(k string) string { return pod.env[k] }, io.Discard)
			msg, _ := os.ReadFile(pod.termLog)
			if code != tc.wantCode || !strings.Contains(string(msg), tc.wantMsg) {
				t.Errorf("exit %d with message %q, want exit %d and a message naming %q", code, msg, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

// The Job backend says, as the HTTP protocol does, when the face is the service's copy of one
// sent inline: its failure names no URL of the service's storage.
func TestJobToldTheFaceWasUploadedKeepsItsURLOutOfTheMessage(t *testing.T) {
	gone := serveMedia(t, t.TempDir()) + "/0123.png"
	pod := newJobPod(t, "video.short")
	pod.env["VIDEOGEN_TEMPLATE_MEDIA_URL"] = gone
	pod.env["VIDEOGEN_FACE_IMAGE_URL"] = gone
	pod.env["VIDEOGEN_FACE_IMAGE_UPLOADED"] = "true"
	code, msg := pod.run(t, "analyze")
	if code != exitFailed || !strings.Contains(msg, "the face image you uploaded could not be read back") || strings.Contains(msg, gone) {
		t.Fatalf("exit %d with message %q, want a failure that names no URL", code, msg)
	}
}

// The Job backend says, as the HTTP protocol does, when the template's media is an official
// template's: only then may it be fetched from --allow-private-service-media's ranges.
func TestJobFetchesOnlyOfficialTemplateMediaFromTheServiceMediaRanges(t *testing.T) {
	media := t.TempDir()
	template := serveMedia(t, media) + "/" + filepath.Base(testmedia.MovingVideo(t, media, 1, ""))
	for _, official := range []string{"true", ""} {
		pod := newJobPod(t, "video.template")
		pod.env["VIDEOGEN_STAGE"] = "analyze"
		pod.env["VIDEOGEN_TEMPLATE_MEDIA_URL"] = template
		pod.env["VIDEOGEN_TEMPLATE_MEDIA_OFFICIAL"] = official
		pod.env["VIDEOGEN_DURATION"] = "1"
		code := runJob([]string{"--blob-dir", pod.blobs, "--allow-private-service-media", "127.0.0.0/8", "--termination-log", pod.termLog, "--fetch-timeout", "2s"},
			func(k string) string { return pod.env[k] }, io.Discard)
		msg, _ := os.ReadFile(pod.termLog)
		if wantOK := official == "true"; (code == exitOK) != wantOK {
			t.Errorf("official %q: exit %d with message %q", official, code, msg)
		}
	}
}

// --fetch-min-rate-bytes and --fetch-min-rate-window reach the fetcher: a source that answers
// and then stalls fails the stage after one window, not at --fetch-timeout; a window of 0 with
// a minimum is refused.
func TestJobCutsASourceSlowerThanTheMinimumRate(t *testing.T) {
	done := make(chan struct{})
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "video/mp4")
		w.Write(make([]byte, 100))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(stalled.Close)
	t.Cleanup(func() { close(done) })
	for _, tc := range []struct {
		window, wantMsg string
	}{
		{"200ms", "the source sent 100 bytes in 200ms, below the minimum of 1 KiB per 200ms"},
		{"0s", "--fetch-min-rate-bytes must be 0 (no minimum) or positive with a positive --fetch-min-rate-window"},
	} {
		pod := newJobPod(t, "video.eraser")
		pod.env["VIDEOGEN_STAGE"] = "analyze"
		pod.env["VIDEOGEN_SOURCE_VIDEO_URL"] = stalled.URL + "/source.mp4"
		start := time.Now()
		code := runJob([]string{"--blob-dir", pod.blobs, "--allow-private-urls", "127.0.0.0/8", "--termination-log", pod.termLog,
			"--fetch-timeout", "30s", "--fetch-min-rate-bytes", "1024", "--fetch-min-rate-window", tc.window},
			func(k string) string { return pod.env[k] }, io.Discard)
		msg, _ := os.ReadFile(pod.termLog)
		if code != exitFailed || !strings.Contains(string(msg), tc.wantMsg) || time.Since(start) > 5*time.Second {
			t.Errorf("window %s: exit %d after %s with message %q, want exit %d soon, with a message naming %q",
				tc.window, code, time.Since(start), msg, exitFailed, tc.wantMsg)
		}
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
	"github.com/videogen-dev/videogen-operator/internal/worker/testmedia"
)

// `worker job` wrote its result as the termination message
// whatever its size, and the kubelet keeps 4096 bytes of it.
//
// Interleaving: a render stage succeeds and its result URL is long (a presigned bucket URL with
// its signature and security token, or a long --public-url), or an analyze stage's outputs are
// large. runJob writes more than 4096 bytes to /dev/termination-log and exits 0; the kubelet
// truncates the message; the Job completes; the controller's Observe finds JSON cut in the
// middle and fails the stage as "not the expected JSON", with the cut text as the reason. What
// the user sees: a task failed with a garbled message after the GPU did all the work, and the
// result blob stays stored with no one to read or delete it.
//
// The fix: runJob measures the message before writing it; one over the kubelet's limit discards
// the result and fails the stage with a message that says why (exit 2: another pod would write
// the same message, so the Job must not retry it).
func TestJobResultTooLongForATerminationMessageFailsClearly(t *testing.T) {
	media := t.TempDir()
	base := serveMedia(t, media)
	pod := newJobPod(t, "video.eraser")
	pod.publicURL = "http://videogen-worker.videogen-system.svc:8080/" + strings.Repeat("x", 4200)
	pod.env["VIDEOGEN_SOURCE_VIDEO_URL"] = base + "/" + filepath.Base(testmedia.WatermarkedVideo(t, media, 1))
	code, msg := pod.run(t, "analyze")
	if code != exitOK {
		t.Fatalf("analyze exited %d: %s", code, msg)
	}
	var analyzed struct{ Outputs map[string]string }
	if err := json.Unmarshal([]byte(msg), &analyzed); err != nil {
		t.Fatal(err)
	}
	previous, _ := json.Marshal(analyzed.Outputs)
	pod.env["VIDEOGEN_PREVIOUS"] = string(previous)

	code, msg = pod.run(t, "render") // run fails the test on a message over 4096 bytes
	if code != exitInvalidInput || !strings.Contains(msg, "4096") {
		t.Errorf("render exited %d with a message of %d bytes starting %.200q; want exit %d and a message naming the 4096-byte limit",
			code, len(msg), msg, exitInvalidInput)
	}
	if left, _ := os.ReadDir(pod.blobs); len(left) != 0 {
		t.Errorf("the unreportable result stays stored: %v", left)
	}
}

// The same for an analyze stage's outputs, without a render to wait for.
func TestTerminationMessageRefusesOutputsOverTheKubeletsLimit(t *testing.T) {
	big := jobs.Outcome{Outputs: map[string]string{"boxes": strings.Repeat("[1,2,3,4],", 500)}}
	if msg, err := terminationMessage("analyze", big); err == nil || !strings.Contains(err.Error(), "4096") {
		t.Errorf("analyze outputs of %d bytes: message of %d bytes, error %v; want an error naming the limit", len(big.Outputs["boxes"]), len(msg), err)
	}
	long := jobs.Outcome{Result: &protocol.Result{URL: "https://bucket.example.com/out.mp4?X-Amz-Security-Token=" + strings.Repeat("a", 4096)}}
	if _, err := terminationMessage("render", long); err == nil {
		t.Error("a render result over the limit was accepted")
	}
	// Checked, holds: a message of exactly the limit is kept whole.
	fits := jobs.Outcome{Outputs: map[string]string{"k": ""}}
	msg, _ := json.Marshal(map[string]any{"outputs": fits.Outputs})
	fits.Outputs["k"] = strings.Repeat("a", 4096-len(msg))
	if msg, err := terminationMessage("analyze", fits); err != nil || len(msg) != 4096 {
		t.Errorf("a message of %d bytes: %v", len(msg), err)
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/worker/capability"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
)

// Exit codes of `worker job`, as the Job backend reads them (docs/job-backend.md).
const (
	exitOK = 0
	// exitFailed: the pod failed; the Job may start another one.
	exitFailed = 1
	// exitInvalidInput: the inputs are unusable, so the Job fails at once (podFailurePolicy).
	exitInvalidInput = 2
)

// maxTerminationMessage is what the kubelet keeps of a container's termination message; it cuts
// the rest, and the Job backend cannot parse JSON cut in the middle.
const maxTerminationMessage = 4096

// errMessageTooLarge: the outcome does not fit the termination message. Another pod would write
// the same, so the Job must not retry.
var errMessageTooLarge = errors.New("too large for the termination message")

// runJob is `worker job`: one stage of a task in a Kubernetes Job's pod. The inputs come from the
// VIDEOGEN_* environment the Job backend sets, the outcome goes to the termination message as the
// JSON the backend reads, and results go to the blob store the flags name (a directory the worker
// Deployment serves, or a bucket).
func runJob(args []string, getenv func(string) string, stderr io.Writer) int {
	cfg := defaults()
	fs := flag.NewFlagSet("worker job", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.bindStageFlags(fs)
	terminationLog := fs.String("termination-log", "/dev/termination-log", "Where the outcome is written for the kubelet (the container's terminationMessagePath).")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK // --help asked for the usage, which fs has printed
		}
		return exitInvalidInput
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	fail := func(code int, err error) int {
		log.Error("stage failed", "error", err)
		// One short line: the stage's message shows it to the task's owner.
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		if werr := os.WriteFile(*terminationLog, []byte(truncate(msg, 1024)), 0o644); werr != nil {
			log.Error("writing the termination message", "path", *terminationLog, "error", werr)
		}
		return code
	}

	req, err := stageRequestFromEnv(getenv)
	if err != nil {
		return fail(exitInvalidInput, err)
	}
	pipelines, _, err := cfg.pipelines()
	if err != nil {
		return fail(exitFailed, err)
	}
	run, err := pipelines.Prepare(req)
	if err != nil {
		return fail(exitCode(err), err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("stage started", "task", req.Task.Namespace+"/"+req.Task.Name, "capability", req.Capability, "stage", req.Stage)
	outcome, err := run(ctx, func(progress int, message string) {
		log.Info("progress", "percent", progress, "message", message)
	})
	if err != nil {
		return fail(exitCode(err), err)
	}
	// A result this pod cannot report is never read: the Job's next pod stores its own.
	discard := func() {
		if outcome.Discard != nil {
			outcome.Discard()
		}
	}
	msg, err := terminationMessage(req.Stage, outcome)
	if err != nil {
		discard()
		if errors.Is(err, errMessageTooLarge) {
			return fail(exitInvalidInput, err)
		}
		return fail(exitFailed, err)
	}
	if err := os.WriteFile(*terminationLog, msg, 0o644); err != nil {
		log.Error("writing the termination message", "path", *terminationLog, "error", err)
		discard()
		return exitFailed
	}
	log.Info("stage succeeded", "message", string(msg))
	return exitOK
}

// exitCode tells the Job whether another pod could do better.
func exitCode(err error) int {
	if errors.Is(err, capability.ErrInvalid) || errors.Is(err, capability.ErrUnsupported) {
		return exitInvalidInput
	}
	return exitFailed
}

// stageRequestFromEnv reads the stage the Job backend describes in VIDEOGEN_* variables.
func stageRequestFromEnv(getenv func(string) string) (protocol.StageRequest, error) {
	req := protocol.StageRequest{
		Capability:            getenv("VIDEOGEN_CAPABILITY"),
		Stage:                 getenv("VIDEOGEN_STAGE"),
		TemplateID:            getenv("VIDEOGEN_TEMPLATE_ID"),
		TemplateMediaURL:      getenv("VIDEOGEN_TEMPLATE_MEDIA_URL"),
		TemplateMediaOfficial: getenv("VIDEOGEN_TEMPLATE_MEDIA_OFFICIAL") == "true",
		Inputs: protocol.Inputs{
			FaceImageURL:      getenv("VIDEOGEN_FACE_IMAGE_URL"),
			FaceImageUploaded: getenv("VIDEOGEN_FACE_IMAGE_UPLOADED") == "true",
			SourceVideoURL:    getenv("VIDEOGEN_SOURCE_VIDEO_URL"),
		},
		Task: &protocol.TaskRef{
			Namespace: getenv("VIDEOGEN_NAMESPACE"),
			Name:      getenv("VIDEOGEN_TASK"),
			UID:       getenv("VIDEOGEN_TASK_UID"),
		},
	}
	for name, v := range map[string]string{"VIDEOGEN_CAPABILITY": req.Capability, "VIDEOGEN_STAGE": req.Stage, "VIDEOGEN_TASK_UID": req.Task.UID} {
		if v == "" {
			return req, fmt.Errorf("%s is not set: run `worker job` from the Job backend's pod template", name)
		}
	}
	// The task's UID and the stage name the stage, as the Job's own name does.
	req.Key = req.Task.UID + "-" + req.Stage
	if d := getenv("VIDEOGEN_DURATION"); d != "" {
		n, err := strconv.ParseInt(d, 10, 32)
		if err != nil {
			return req, fmt.Errorf("VIDEOGEN_DURATION %q must be an integer number of seconds", d)
		}
		duration := int32(n)
		req.Duration = &duration
	}
	if p := getenv("VIDEOGEN_PREVIOUS"); p != "" {
		if err := json.Unmarshal([]byte(p), &req.Previous); err != nil {
			return req, fmt.Errorf("VIDEOGEN_PREVIOUS must be a JSON object of strings: %w", err)
		}
	}
	return req, nil
}

// terminationMessage is the outcome as the Job backend reads it: {"outputs": …} of an analyze
// stage, {"result": …} of a render stage, refused (errMessageTooLarge) over the kubelet's limit.
func terminationMessage(stage string, o jobs.Outcome) ([]byte, error) {
	var msg []byte
	var err error
	if stage == "render" {
		if o.Result == nil {
			return nil, errors.New("render produced no result")
		}
		msg, err = json.Marshal(map[string]any{"result": o.Result})
	} else {
		outputs := o.Outputs
		if outputs == nil {
			outputs = map[string]string{}
		}
		msg, err = json.Marshal(map[string]any{"outputs": outputs})
	}
	if err == nil && len(msg) > maxTerminationMessage {
		what := "outputs"
		if stage == "render" {
			what = "result (its URL is " + strconv.Itoa(len(o.Result.URL)) + " bytes)"
		}
		return nil, fmt.Errorf("the %s stage's %s is %d bytes as JSON, %w: the kubelet keeps at most %d bytes of it",
			stage, what, len(msg), errMessageTooLarge, maxTerminationMessage)
	}
	return msg, err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

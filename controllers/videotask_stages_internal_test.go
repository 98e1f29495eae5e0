package controllers

import (
	"errors"
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
)

func TestATaskRefusedByItsBackendSaysWhatTheBackendSaidOfTheInput(t *testing.T) {
	exchange := errors.New("backend answered POST /v1/stages with 400: invalid_request: the face image has no face")
	cases := []struct {
		name   string
		handle string
		err    error
		want   string
	}{
		{"a refusal with the backend's words", "", generation.Refused(exchange, "the face image has no face"),
			"the analyze stage was refused: the face image has no face"},
		{"a refusal without them", "", generation.Permanent(errors.New("the job backend has no pod template for capability video.short")),
			"the analyze stage was refused: the job backend has no pod template for capability video.short"},
		{"a stage the backend forgot", "stg_1", generation.Permanent(exchange),
			"the backend lost the analyze stage (it may have restarted)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &videogenv1alpha1.StageStatus{Name: videogenv1alpha1.StageAnalyze, Handle: c.handle}
			if got := permanentErrorMessage(st, c.err); got != c.want {
				t.Errorf("message = %q, want %q", got, c.want)
			}
		})
	}
}

// A stage with a handle that a permanent, non-lost error ended (its backend's
// answer broke the protocol: outputs that are not strings, a 414 on its id) tells the caller
// so, instead of "the backend lost the render stage (it may have restarted)", which was untrue.
func TestPermanentErrorMessageOfABrokenAnswerIsNotLost(t *testing.T) {
	st := &videogenv1alpha1.StageStatus{Name: videogenv1alpha1.StageRender, Handle: "stg_1"}
	err := generation.Refused(errors.New("backend GET /v1/stages/stg_1: …"), "the backend's answer does not follow the protocol: its outputs holds a JSON number where the protocol has another type")
	if got, want := permanentErrorMessage(st, err), "the render stage failed: the backend's answer does not follow the protocol: its outputs holds a JSON number where the protocol has another type"; got != want {
		t.Errorf("permanentErrorMessage = %q, want %q", got, want)
	}
	if got := permanentErrorMessage(st, generation.Lost(errors.New("404"))); got != lostStage(videogenv1alpha1.StageRender) {
		t.Errorf("a lost stage: %q", got)
	}
}

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

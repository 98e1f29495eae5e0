package v1alpha1

import (
	"encoding/json"
	"strings"
	"testing"
)

// kubectl's printer columns show a missing field as blank: every figure of an account is
// written even when it is 0, so `kubectl get pointaccounts -o wide` reads 0, not nothing.
func TestAnEmptyAccountShowsEveryFigure(t *testing.T) {
	out, err := json.Marshal(PointAccountStatus{})
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"balance":0`, `"frozen":0`, `"spent":0`, `"credited":0`, `"holds":0`} {
		if !strings.Contains(string(out), field) {
			t.Errorf("%s lacks %s", out, field)
		}
	}
}

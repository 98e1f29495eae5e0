package jobbackend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// analyzeMessage is the termination message of a succeeded analyze container.
type analyzeMessage struct {
	Outputs map[string]json.RawMessage `json:"outputs"`
}

// renderMessage is the termination message of a succeeded render container.
type renderMessage struct {
	Result *struct {
		URL       string                     `json:"url"`
		MediaType string                     `json:"media_type"`
		Metadata  map[string]json.RawMessage `json:"metadata"`
	} `json:"result"`
}

// parseAnalyzeMessage reads {"outputs":{...}}; outputs may be empty but must be there.
func parseAnalyzeMessage(msg string) (map[string]string, error) {
	var m analyzeMessage
	if err := decodeMessage(msg, &m); err != nil {
		return nil, err
	}
	if m.Outputs == nil {
		return nil, errors.New(`the termination message has no "outputs" object`)
	}
	return stringValues(m.Outputs), nil
}

// parseRenderMessage reads {"result":{"url":…,"media_type":…,"metadata":{…}}}.
func parseRenderMessage(msg string) (*videogenv1alpha1.TaskResult, error) {
	var m renderMessage
	if err := decodeMessage(msg, &m); err != nil {
		return nil, err
	}
	if m.Result == nil || m.Result.URL == "" {
		return nil, errors.New(`the termination message has no "result" with a "url"`)
	}
	r := &videogenv1alpha1.TaskResult{URL: m.Result.URL, MediaType: m.Result.MediaType}
	if len(m.Result.Metadata) > 0 {
		r.Metadata = stringValues(m.Result.Metadata)
	}
	return r, nil
}

func decodeMessage(msg string, into any) error {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return errors.New("the container wrote no termination message (expected JSON in /dev/termination-log)")
	}
	if err := json.Unmarshal([]byte(msg), into); err != nil {
		return fmt.Errorf("the termination message is not the expected JSON (%v): %s", err, excerpt(msg))
	}
	return nil
}

// stringValues keeps strings as they are and any other JSON value as its compact text, so a
// container may write {"fps": 25} as well as {"fps": "25"}.
func stringValues(raw map[string]json.RawMessage) map[string]string {
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			out[k] = s
			continue
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, v); err != nil || compact.String() == "null" {
			out[k] = ""
			continue
		}
		out[k] = compact.String()
	}
	return out
}

// parseProgress reads AnnotationProgress: a number of percent, clamped to 0–100.
func parseProgress(s string) (int32, bool) {
	f, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	return int32(min(max(f, 0), 100)), true
}

// excerpt shortens text for a status message; termination messages can be 4 KiB of logs.
func excerpt(s string) string {
	const limit = 300
	s = strings.TrimSpace(s)
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

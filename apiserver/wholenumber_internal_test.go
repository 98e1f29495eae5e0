package apiserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A duration is an integer as the OpenAPI document's JSON Schema says one is: any number without
// a fractional part, however written; anything else gets the answer an int32 field got before.
func TestADurationIsAnyNumberOfIntegerValue(t *testing.T) {
	decode := func(body string) (*templateVideoRequest, error) {
		r := httptest.NewRequest(http.MethodPost, "/v1/videos/template", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var req templateVideoRequest
		err := decodeJSON(httptest.NewRecorder(), r, 1<<20, &req)
		return &req, err
	}
	for body, want := range map[string]int32{
		`{"duration": 5}`: 5, `{"duration": 5.0}`: 5, `{"duration": 5.000}`: 5, `{"duration": 5e0}`: 5,
		`{"duration": 0.5e1}`: 5, `{"duration": 3600.0}`: 3600, `{"duration": -0.0}`: 0, `{"duration": 2147483647.0}`: 2147483647,
		`{"duration": 12e2}`: 1200, `{"duration": 0e999999999999}`: 0, `{"duration": -5.0}`: -5,
	} {
		req, err := decode(body)
		if err != nil || req.Duration == nil || int32(*req.Duration) != want {
			t.Errorf("%s: duration %v, error %v; want %d", body, req.Duration, err, want)
		}
	}
	for body, message := range map[string]string{
		`{"duration": 5.5}`:                   `field "duration" must be an integer, not 5.5`,
		`{"duration": 5.0000000000000000001}`: `field "duration" must be an integer, not 5.0000000000000000001`,
		`{"duration": "5"}`:                   `field "duration" must be an integer, not a string`,
		`{"duration": true}`:                  `field "duration" must be an integer, not true or false`,
		`{"duration": [5]}`:                   `field "duration" must be an integer, not an array`,
		`{"duration": {}}`:                    `field "duration" must be an integer, not an object`,
		`{"duration": 2147483648}`:            `field "duration" is out of range: 2147483648`,
		`{"duration": 1e10}`:                  `field "duration" is out of range: 10000000000`,
		`{"duration": 1e400}`:                 `field "duration" is out of range: 10000000000000000000000000000000… (41 digits)`,
		`{"duration": 5e-999999999999}`:       `field "duration" must be an integer, not 5e-999999999999`,
	} {
		_, err := decode(body)
		if err == nil || err.Error() != message {
			t.Errorf("%s: error %v, want %q", body, err, message)
		}
	}
	if req, err := decode(`{"duration": null}`); err != nil || req.Duration != nil {
		t.Errorf("null: duration %v, error %v; want none", req.Duration, err)
	}
}

package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/videogen-dev/videogen-operator/apiserver/httpjson"
)

// requestError is a 4xx answer with a stable code.
type requestError struct {
	status  int
	code    string
	message string
}

func (e *requestError) Error() string { return e.message }

func badRequest(format string, args ...any) *requestError {
	return &requestError{status: http.StatusBadRequest, code: httpjson.CodeInvalidRequest, message: fmt.Sprintf(format, args...)}
}

// writeRequestError answers err if it is a *requestError and reports whether it did.
func writeRequestError(w http.ResponseWriter, r *http.Request, err error) bool {
	var re *requestError
	if errors.As(err, &re) {
		httpjson.WriteError(w, r, re.status, re.code, re.message)
		return true
	}
	return false
}

// decodeJSON reads a JSON object into v strictly: a JSON content type, a size cap, no unknown
// fields, no trailing data, and error messages that name the offending field.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		// curl -d labels bodies application/x-www-form-urlencoded unless told otherwise; the
		// body is still parsed as JSON, so copy-pasted examples work.
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json") && mt != "application/x-www-form-urlencoded") {
			return &requestError{status: http.StatusUnsupportedMediaType, code: httpjson.CodeUnsupportedMedia,
				message: fmt.Sprintf("Content-Type must be application/json, not %q", ct)}
		}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeDecodeError(err, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("the body must hold exactly one JSON object")
	}
	return nil
}

func describeDecodeError(err error, limit int64) error {
	var (
		maxErr    *http.MaxBytesError
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &maxErr):
		return &requestError{status: http.StatusRequestEntityTooLarge, code: httpjson.CodePayloadTooLarge,
			message: fmt.Sprintf("the body is larger than %d bytes", limit)}
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return badRequest("the body must be a JSON object")
		}
		return badRequest("field %q must be %s, not %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return badRequest("malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case errors.Is(err, io.EOF):
		return badRequest("the body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed JSON: the body ends too early")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badRequest("malformed JSON: %v", err)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int32", "int64", "uint", "uint32", "uint64", "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	}
	return "of another type"
}

// fieldChecker collects field validation for one request and reports the first problem.
type fieldChecker struct{ err *requestError }

func (c *fieldChecker) fail(format string, args ...any) {
	if c.err == nil {
		c.err = badRequest(format, args...)
	}
}

// required refuses a missing or blank string field.
func (c *fieldChecker) required(name string, v *string) {
	if v == nil {
		c.fail("field %q is required", name)
	} else if strings.TrimSpace(*v) == "" {
		c.fail("field %q must not be empty", name)
	}
}

// optional refuses a present but blank string field.
func (c *fieldChecker) optional(name string, v *string) {
	if v != nil && strings.TrimSpace(*v) == "" {
		c.fail("field %q must not be empty when present", name)
	}
}

func (c *fieldChecker) result() error {
	if c.err == nil {
		return nil
	}
	return c.err
}

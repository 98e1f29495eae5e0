package apiserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/videogen-dev/videogen-operator/internal/httpjson"
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

// decodeJSON reads a JSON object into v strictly: a JSON content type in UTF-8, a size cap,
// field names exactly as documented and each at most once, no unknown fields, no trailing
// data, and error messages that name the offending field.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	_, err := readJSON(w, r, limit, v)
	return err
}

// readJSON is decodeJSON that also returns the body it read.
func readJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) ([]byte, error) {
	form, labelErr := jsonContentType(r.Header.Get("Content-Type"))
	in := bufio.NewReader(http.MaxBytesReader(w, r.Body, limit))
	lead, err := leadingSpace(in)
	if errors.Is(err, io.EOF) {
		// No content: no Content-Type or Content-Encoding describes it, and what the client
		// must change is the missing body (curl -d "" sends curl -d's form label).
		return nil, badRequest("the body is empty; send a JSON object")
	}
	// A body that is there is refused for its label before the rest of it is read.
	if labelErr != nil {
		return nil, labelErr
	}
	if err := identityEncoding(w, r.Header.Values("Content-Encoding")); err != nil {
		return nil, err
	}
	var rest []byte
	if err == nil {
		rest, err = io.ReadAll(in)
	}
	if err != nil {
		return nil, describeReadError(err, limit)
	}
	body := append(lead, rest...)
	if err := checkEncoding(body, form); err != nil {
		return nil, err
	}
	if err := checkUTF8(body); err != nil {
		return nil, err
	}
	if bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		// encoding/json reads null into a struct as nothing at all; it is not an object.
		return nil, badRequest("the body must be a JSON object, not null")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, describeDecodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("the body must hold exactly one JSON object")
	}
	if err := checkSurrogates(body); err != nil {
		return nil, err
	}
	return body, checkFieldNames(body, v)
}

// jsonSpace is JSON's white space (RFC 8259): a body of only these is empty.
const jsonSpace = " \t\r\n"

// leadingSpace reads the JSON white space at the start of r and leaves its first other byte
// unread: io.EOF if there is none, so that a body which is not there is told apart from one
// with a wrong label by reading no further than that byte.
func leadingSpace(r *bufio.Reader) ([]byte, error) {
	var lead []byte
	for {
		b, err := r.ReadByte()
		if err != nil {
			return lead, err
		}
		if !strings.ContainsRune(jsonSpace, rune(b)) {
			return lead, r.UnreadByte()
		}
		lead = append(lead, b)
	}
}

// noBodyLimit caps the body of a POST that takes none: enough for any {} a client sends.
const noBodyLimit = 64 << 10

// noBody refuses a body on a POST that takes none (a cancel, a rotation) as readJSON refuses an
// unknown field: {"previous_expires_in":0} read as absent would rotate with the old secret
// signing for the whole overlap while its client believes it cut off. No body, white space or
// {} is none.
func noBody(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, noBodyLimit))
	if err != nil {
		return describeReadError(err, noBodyLimit)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var none struct{}
	if err := decodeJSON(w, r, noBodyLimit, &none); err != nil {
		var re *requestError
		if errors.As(err, &re) && re.status == http.StatusBadRequest {
			re.message += " (this endpoint takes no body: send none, or {})"
		}
		return err
	}
	return nil
}

// queryParams reads the query string as strictly as readJSON reads a body: well formed, only
// the parameters the endpoint takes (known), each at most once. A misspelt or unsupported
// filter (?capabilty=, ?status=failed) read as absent would answer every object instead of the
// ones asked for, and a client acting on that list (resubmitting "failed" tasks) acts on all.
func queryParams(r *http.Request, known ...string) (url.Values, error) {
	// Pair by pair rather than url.ParseQuery, which reads every pair first: a query of 20,000
	// parameters stops at the first unknown one instead of at url's cap on their number.
	q := url.Values{}
	for pair := range strings.SplitSeq(r.URL.RawQuery, "&") {
		if pair == "" {
			continue
		}
		rawName, rawValue, _ := strings.Cut(pair, "=")
		name, nerr := url.QueryUnescape(rawName)
		value, verr := url.QueryUnescape(rawValue)
		switch {
		case nerr != nil || verr != nil || strings.Contains(pair, ";"):
			return nil, badRequest("the query string is malformed: send name=value pairs joined by &, with %% followed by two hex digits")
		case !slices.Contains(known, name) && len(known) == 0:
			return nil, badRequest("unknown query parameter %s; this endpoint takes no query parameters", httpjson.Echo(name))
		case !slices.Contains(known, name):
			return nil, badRequest("unknown query parameter %s; this endpoint takes %s", httpjson.Echo(name), strings.Join(known, ", "))
		case q.Has(name):
			return nil, badRequest("query parameter %s appears more than once", httpjson.Echo(name))
		}
		q.Set(name, value)
	}
	return q, nil
}

// nullFields are the fields of a JSON object (one readJSON accepted) sent as null. encoding/json
// reads null as absent; a PATCH tells them apart: null clears a field, absence keeps it.
func nullFields(body []byte) map[string]bool {
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(body, &fields)
	out := map[string]bool{}
	for name, raw := range fields {
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			out[name] = true
		}
	}
	return out
}

// jsonContentType accepts JSON in UTF-8 (no Content-Type at all counts as JSON) and curl -d's
// default label, application/x-www-form-urlencoded, reporting the latter: such a body is read
// as JSON only if it is a JSON object.
func jsonContentType(ct string) (form bool, err error) {
	if ct == "" {
		return false, nil
	}
	mt, params, perr := mime.ParseMediaType(ct)
	form = mt == "application/x-www-form-urlencoded"
	if perr != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json") && !form) {
		return false, unsupportedMedia("Content-Type must be application/json, not %s", httpjson.Echo(ct))
	}
	if cs, ok := params["charset"]; ok && !slices.Contains(utf8Labels, strings.ToLower(cs)) {
		return false, unsupportedMedia("JSON bodies must be UTF-8, not charset=%s", httpjson.Echo(cs))
	}
	return form, nil
}

// utf8Labels are the names of UTF-8 a charset parameter is sent with: the WHATWG Encoding
// Standard's labels of UTF-8 (what browsers and fetch read as UTF-8), utf8 among them.
var utf8Labels = []string{"utf-8", "utf8", "unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "x-unicode20utf8"}

// identityEncoding refuses a body sent with a content coding (gzip, br, …): the service reads
// bodies as sent, so a compressed one would be read as malformed JSON, and one labelled gzip
// but sent plain would be accepted under a false label. RFC 9110 answers an unsupported content
// coding with 415 and an Accept-Encoding that names the codings accepted.
func identityEncoding(w http.ResponseWriter, values []string) error {
	for _, v := range values {
		for _, coding := range strings.Split(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				w.Header().Set("Accept-Encoding", "identity")
				return unsupportedMedia("Content-Encoding %s is not supported: send the body uncompressed, without a Content-Encoding",
					httpjson.Echo(strings.Join(values, ", ")))
			}
		}
	}
	return nil
}

// checkEncoding refuses bodies that are not UTF-8 JSON from the first byte: a byte order mark
// or the NULs of UTF-16, and a real form (a=b&c=d) sent with curl -d's label.
func checkEncoding(body []byte, form bool) error {
	if bytes.HasPrefix(body, []byte{0xef, 0xbb, 0xbf}) || bytes.HasPrefix(body, []byte{0xfe, 0xff}) ||
		bytes.HasPrefix(body, []byte{0xff, 0xfe}) || (len(body) > 1 && (body[0] == 0 || body[1] == 0)) {
		return unsupportedMedia("the body must be JSON in UTF-8, without a byte order mark")
	}
	if form && !bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")) {
		return unsupportedMedia("the body must be a JSON object; a form (a=b&c=d) is not accepted: send Content-Type: application/json (curl --json)")
	}
	return nil
}

// checkUTF8 refuses a body with bytes that are not UTF-8 (Latin-1 "café", a stray 0xff),
// naming the field that holds them. encoding/json would read each such byte as U+FFFD and
// store "caf\ufffd" as if it had been sent.
func checkUTF8(body []byte) error {
	if utf8.Valid(body) {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) == nil {
		names := slices.Sorted(maps.Keys(fields))
		for _, name := range names {
			if !utf8.Valid(fields[name]) {
				return badRequest("field %s is not valid UTF-8: send text in UTF-8", httpjson.Echo(name))
			}
		}
		return badRequest("a field name is not valid UTF-8: send text in UTF-8")
	}
	return badRequest("the body is not valid UTF-8: send JSON in UTF-8")
}

// checkSurrogates refuses a \u escape of half a UTF-16 surrogate pair with no other half (a
// string cut between the halves of an emoji), naming the field that holds it: encoding/json
// reads it as U+FFFD, which would be stored as if it had been sent, as checkUTF8 says of a
// stray byte. body is JSON that decoded.
func checkSurrogates(body []byte) error {
	if !loneSurrogate(body) {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) == nil {
		for _, name := range slices.Sorted(maps.Keys(fields)) {
			if loneSurrogate(fields[name]) {
				return badRequest("field %s holds a \\u escape of half a UTF-16 surrogate pair (\\uD800–\\uDFFF without its other half), which is no character: send text in UTF-8", httpjson.Echo(name))
			}
		}
	}
	return badRequest("a field name holds a \\u escape of half a UTF-16 surrogate pair, which is no character: send text in UTF-8")
}

// loneSurrogate reports whether the JSON text b has a \u escape in D800–DFFF that is not a
// high half followed at once by an escaped low half.
func loneSurrogate(b []byte) bool {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16)
		return rune(n), err == nil
	}
	inString := false
	for i := 0; i < len(b); i++ {
		switch {
		case !inString:
			inString = b[i] == '"'
		case b[i] == '"':
			inString = false
		case b[i] == '\\':
			r, ok := hex4(i)
			switch {
			case !ok:
				i++ // another escape: skip the escaped character
			case r >= 0xd800 && r <= 0xdbff:
				if lo, ok := hex4(i + 6); !ok || lo < 0xdc00 || lo > 0xdfff {
					return true
				}
				i += 11
			case r >= 0xdc00 && r <= 0xdfff:
				return true
			default:
				i += 5
			}
		}
	}
	return false
}

func unsupportedMedia(format string, args ...any) *requestError {
	return &requestError{status: http.StatusUnsupportedMediaType, code: httpjson.CodeUnsupportedMedia, message: fmt.Sprintf(format, args...)}
}

// describeReadError answers a body that could not be read: too large, or too slow (the
// server's read deadline).
func describeReadError(err error, limit int64) error {
	var maxErr *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &maxErr):
		return &requestError{status: http.StatusRequestEntityTooLarge, code: httpjson.CodePayloadTooLarge,
			message: fmt.Sprintf("the body is larger than %d bytes", limit)}
	case errors.As(err, &netErr) && netErr.Timeout():
		return &requestError{status: http.StatusRequestTimeout, code: httpjson.CodeRequestTimeout,
			message: "the body was not received in time"}
	}
	return badRequest("reading the body: %v", err)
}

func describeDecodeError(err error) error {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return badRequest("the body must be a JSON object")
		}
		return describeTypeError(typeErr)
	case errors.As(err, &syntaxErr):
		return badRequest("malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case errors.Is(err, io.EOF):
		return badRequest("the body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed JSON: the body ends too early")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return badRequest("unknown field %s", httpjson.Echo(name))
	}
	return badRequest("malformed JSON: %v", err)
}

// describeTypeError says what the field must be and what was sent, without echoing a long value.
func describeTypeError(e *json.UnmarshalTypeError) error {
	field := httpjson.Echo(e.Field)
	number, isNumber := strings.CutPrefix(e.Value, "number ")
	switch kind := e.Type.Kind(); {
	case kind >= reflect.Int && kind <= reflect.Uint64 && isNumber && !strings.ContainsAny(number, ".eE"):
		// An integer that does not fit the field's type.
		return badRequest("field %s is out of range: %s", field, shorten(number))
	case kind >= reflect.Int && kind <= reflect.Uint64:
		return badRequest("field %s must be an integer, not %s", field, sentValue(e.Value))
	}
	return badRequest("field %s must be %s, not %s", field, httpjson.KindName(e.Type.Kind()), sentValue(e.Value))
}

// sentValue names what encoding/json found: "a string", "true or false", or the number itself.
func sentValue(v string) string {
	if n, ok := strings.CutPrefix(v, "number "); ok {
		return shorten(n)
	}
	switch v {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "array":
		return "an array"
	case "object":
		return "an object"
	case "number":
		return "a number"
	}
	return v
}

// shorten cuts a number literal to a readable length.
func shorten(n string) string {
	if len(n) <= 32 {
		return n
	}
	return n[:32] + "… (" + strconv.Itoa(len(n)) + " digits)"
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

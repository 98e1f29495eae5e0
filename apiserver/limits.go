package apiserver

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/videogen-dev/videogen-operator/internal/netguard"
)

// Longest values of request fields, in characters: the maxLength of the CRD field each is
// stored in, so that the kube-apiserver never refuses what validation let through (its "Too
// long" would be a 500, and again on every replay). A test compares them with the CRDs.
const (
	maxTemplateIDLength = 253  // VideoTask spec.templateRef
	maxURLLength        = 2048 // VideoTask inputs and webhookURL, ShortTemplate targetURL and coverURL
	maxNameLength       = 128  // ShortTemplate spec.displayName
)

// The range of every duration field, the minimum and maximum of the CRDs' spec.duration.
const (
	minDuration = 1
	maxDuration = 3600
)

// fieldLimit ties a request field to the CRD field that stores it.
type fieldLimit struct {
	Field    string // in the request body
	Resource string // the CRD's plural
	Path     string // in the object, dot-separated
	Max      int
}

var fieldLimits = []fieldLimit{
	{"template_id", "videotasks", "spec.templateRef", maxTemplateIDLength},
	{"face", "videotasks", "spec.inputs.faceImageURL", maxURLLength},
	{"video", "videotasks", "spec.inputs.sourceVideoURL", maxURLLength},
	{"webhook_url", "videotasks", "spec.webhookURL", maxURLLength},
	{"name", "shorttemplates", "spec.displayName", maxNameLength},
	{"target_url", "shorttemplates", "spec.targetURL", maxURLLength},
	{"cover_url", "shorttemplates", "spec.coverURL", maxURLLength},
}

// maxLength refuses a value longer than max characters (the unit of a CRD's maxLength).
func (c *fieldChecker) maxLength(name string, v *string, max int) {
	if v != nil && c.err == nil {
		c.err = lengthError(name, *v, max)
	}
}

// duration refuses a duration outside 1–3600 seconds, on every endpoint that takes one: a
// fixed-price template ignores it in the price, but it is stored all the same.
func (c *fieldChecker) duration(v *int32) {
	if v != nil && c.err == nil {
		c.err = durationError(*v)
	}
}

func durationError(d int32) *requestError {
	if d < minDuration || d > maxDuration {
		return badRequest("field \"duration\" must be from %d to %d seconds, not %d", minDuration, maxDuration, d)
	}
	return nil
}

func lengthError(field, v string, max int) *requestError {
	if n := utf8.RuneCountInString(v); n > max {
		return badRequest("field %q must be at most %d characters, not %d", field, max, n)
	}
	return nil
}

// checkURL applies the URL policy to a field and returns the URL to store: with its host in
// the form that was checked (IDNA), and no longer than a CRD field takes.
func checkURL(policy netguard.Policy, field, raw string) (string, error) {
	if err := lengthError(field, raw, maxURLLength); err != nil {
		return "", err
	}
	u, err := policy.CheckURL(raw)
	if err != nil {
		return "", badRequest("field %q: %v", field, err)
	}
	out := u.String()
	if n := utf8.RuneCountInString(out); n > maxURLLength {
		return "", badRequest("field %q must be at most %d characters once its host is in ASCII (IDNA), not %d", field, maxURLLength, n)
	}
	return out, nil
}

// displayName checks a name shown to people (the CRDs' displayName pattern says the same; a
// blank one is refused where the body is decoded): no control characters (a NUL, a newline, an
// escape sequence for a terminal), line separators or zero-width spaces, which break or hide
// text; and no bidirectional overrides, which can make a name read differently from what it is
// ("invoice" U+202E "gpj.exe" shows as "invoiceexe.jpg").
func displayName(name string) error {
	if i := strings.IndexFunc(name, func(r rune) bool { return unicode.IsControl(r) || isHiddenOrBidi(r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		return badRequest("field \"name\" must not contain control characters, line separators, zero-width spaces or bidirectional overrides (found U+%04X at byte %d)", r, i)
	}
	return nil
}

func isHiddenOrBidi(r rune) bool {
	switch r {
	case '\u061c', '\u200b', '\u200e', '\u200f', '\u2028', '\u2029', '\ufeff':
		return true
	}
	return (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069')
}

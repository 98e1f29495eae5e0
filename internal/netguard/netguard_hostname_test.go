package netguard

import (
	"strings"
	"testing"
)

// Found by a hostile-input sweep of the /v1 routes: CheckURL accepted host
// names no resolver can look up, because its IDNA profile does not check DNS lengths: an empty
// label (a leading dot, two dots in a row), a label longer than 63 bytes, a name longer than 253.
//
// Input: one POST /v1/videos/eraser {"video":"https://cdn..example.com/v.mp4"} (a typo, a URL
// built by concatenating "." twice), or a webhook_url such as "https://.hooks.example.com/cb",
// on any task-creating route. Nothing races. What the user saw: 202, the task's price frozen,
// then a task that fails when its video cannot be fetched (points refunded, minutes later), or
// a task that succeeds and is charged while every delivery of its webhook fails ("no such
// host"), where the promise is a 400 naming the field for input that can never work.
//
// Want: refused as an invalid host name; names at the limits, and one trailing dot, still taken.
func TestCheckURLRefusesHostNamesNoResolverCanLookUp(t *testing.T) {
	p := Policy{}
	label63, label64 := strings.Repeat("a", 63), strings.Repeat("a", 64)
	long := strings.Repeat(label63+".", 4)[:254] // 254 bytes, every label at most 63
	for _, raw := range []string{
		"https://cdn..example.com/v.mp4",
		"https://.hooks.example.com/cb",
		"https://cdn.example.com../v.mp4",
		"https://" + label64 + ".example.com/v.mp4",
		"https://" + strings.TrimSuffix(long, ".") + "a/v.mp4",
	} {
		if _, err := p.CheckURL(raw); err == nil || !strings.Contains(err.Error(), "host name") {
			t.Errorf("CheckURL(%.80q) = %v; want refused as an invalid host name", raw, err)
		}
	}
	ok253 := strings.Repeat(label63+".", 3) + strings.Repeat("b", 253-3*64)
	for _, raw := range []string{
		"https://" + label63 + ".example.com/v.mp4",
		"https://" + ok253 + "/v.mp4",
		"https://" + ok253 + "./v.mp4",
		"https://cdn.example.com./v.mp4",
		"https://my_host.example.com/f.jpg",
		"https://bücher.example/cover.jpg",
	} {
		if _, err := p.CheckURL(raw); err != nil {
			t.Errorf("CheckURL(%.80q) = %v; want accepted", raw, err)
		}
	}
}

package jobbackend

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseAnalyzeMessage(t *testing.T) {
	got, err := parseAnalyzeMessage(`{"outputs":{"faces":"1","box":[10,20],"ok":true,"none":null}}` + "\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"faces": "1", "box": "[10,20]", "ok": "true", "none": ""}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("outputs[%s] = %q, want %q", k, got[k], v)
		}
	}
	if got, err := parseAnalyzeMessage(`{"outputs":{}}`); err != nil || len(got) != 0 {
		t.Errorf("empty outputs = %v, %v", got, err)
	}
}

func TestParseRenderMessage(t *testing.T) {
	r, err := parseRenderMessage(`{"result":{"url":"https://cdn.example.com/out.mp4","media_type":"video/mp4","metadata":{"fps":25,"codec":"h264"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	if r.URL != "https://cdn.example.com/out.mp4" || r.MediaType != "video/mp4" || r.Metadata["fps"] != "25" || r.Metadata["codec"] != "h264" {
		t.Fatalf("result = %+v", r)
	}
}

func TestMalformedMessagesAreExplained(t *testing.T) {
	cases := []struct {
		name string
		run  func() error
		want string
	}{
		{"empty", func() error { _, err := parseAnalyzeMessage("  "); return err }, "wrote no termination message"},
		{"not json", func() error { _, err := parseAnalyzeMessage("panic: CUDA out of memory"); return err }, "not the expected JSON"},
		{"no outputs", func() error { _, err := parseAnalyzeMessage(`{"output":{}}`); return err }, `no "outputs" object`},
		{"no url", func() error { _, err := parseRenderMessage(`{"result":{"media_type":"video/mp4"}}`); return err }, `no "result" with a "url"`},
		{"wrong shape", func() error { _, err := parseRenderMessage(`{"result":"https://x"}`); return err }, "not the expected JSON"},
	}
	for _, tc := range cases {
		if err := tc.run(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

func TestParseProgress(t *testing.T) {
	for in, want := range map[string]int32{"42": 42, " 42.9 ": 42, "75%": 75, "140": 100, "-3": 0} {
		if got, ok := parseProgress(in); !ok || got != want {
			t.Errorf("parseProgress(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "half", "NaN"} {
		if _, ok := parseProgress(in); ok {
			t.Errorf("parseProgress(%q) accepted it", in)
		}
	}
}

func TestExcerptCutsLongTextOnARuneBoundary(t *testing.T) {
	s := excerpt(strings.Repeat("é", 400))
	if !strings.HasSuffix(s, "…") || len(s) > 304 || !utf8.ValidString(s) {
		t.Fatalf("excerpt = %q", s)
	}
}

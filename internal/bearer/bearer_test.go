package bearer

import (
	"net/http"
	"testing"
)

func TestToken(t *testing.T) {
	for value, want := range map[string]string{
		"Bearer vg_key":      "vg_key",
		"bearer vg_key":      "vg_key",
		"BEARER vg_key":      "vg_key",
		"BeArEr   vg_key  ":  "vg_key",
		" Bearer vg_key":     "vg_key",
		"Bearer":             "",
		"Bearer ":            "",
		"Bearervg_key":       "",
		"Basic dXNlcjpwdw==": "",
		"vg_key":             "",
		"":                   "",
	} {
		got, ok := Token(value)
		if got != want || ok != (want != "") {
			t.Errorf("Token(%q) = %q, %v; want %q", value, got, ok, want)
		}
	}
}

func TestFromHeader(t *testing.T) {
	h := http.Header{}
	if tok, ok, repeated := FromHeader(h); tok != "" || ok || repeated != nil {
		t.Errorf("no header: %q, %v, %v", tok, ok, repeated)
	}
	h.Set("Authorization", "bearer vg_key")
	if tok, ok, repeated := FromHeader(h); tok != "vg_key" || !ok || repeated != nil {
		t.Errorf("one header: %q, %v, %v", tok, ok, repeated)
	}
	h.Add("Authorization", "Bearer vg_other")
	if tok, ok, repeated := FromHeader(h); tok != "" || ok || repeated == nil || repeated.Error() != "send one Authorization header, not 2" {
		t.Errorf("two headers: %q, %v, %v; want no token, 2", tok, ok, repeated)
	}
}

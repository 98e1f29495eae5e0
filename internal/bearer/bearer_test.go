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
	if tok, ok, n := FromHeader(h); tok != "" || ok || n != 0 {
		t.Errorf("no header: %q, %v, %d", tok, ok, n)
	}
	h.Set("Authorization", "bearer vg_key")
	if tok, ok, n := FromHeader(h); tok != "vg_key" || !ok || n != 0 {
		t.Errorf("one header: %q, %v, %d", tok, ok, n)
	}
	h.Add("Authorization", "Bearer vg_other")
	if tok, ok, n := FromHeader(h); tok != "" || ok || n != 2 {
		t.Errorf("two headers: %q, %v, %d; want no token, 2", tok, ok, n)
	}
}

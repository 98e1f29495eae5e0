package bearer

import "testing"

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

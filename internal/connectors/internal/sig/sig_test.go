package sig

import (
	"encoding/hex"
	"strings"
	"testing"
)

// RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
func TestHMACRFC4231(t *testing.T) {
	key, data := []byte("Jefe"), []byte("what do ya want for nothing?")
	if got := hex.EncodeToString(HMACSHA256(key, data[:10], data[10:])); got != "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843" {
		t.Errorf("HMAC-SHA256 = %s", got)
	}
	if got := hex.EncodeToString(HMACSHA512(key, data)); got != "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737" {
		t.Errorf("HMAC-SHA512 = %s", got)
	}
}

func TestMatchAndUsable(t *testing.T) {
	mac := func(key []byte) []byte { return HMACSHA256(key, []byte("m")) }
	keys := Usable([][]byte{nil, []byte("old"), {}, []byte("new")})
	if len(keys) != 2 {
		t.Fatalf("Usable kept %d keys", len(keys))
	}
	good := mac([]byte("new"))
	if !Match(keys, [][]byte{[]byte("junk"), good}, mac) {
		t.Error("second key / second candidate not matched")
	}
	if Match(keys, [][]byte{good[:31]}, mac) || Match(nil, [][]byte{good}, mac) || Match(keys, nil, mac) {
		t.Error("matched what it should not")
	}
}

func TestHeaderScheme(t *testing.T) {
	s := HeaderScheme{Header: "X-Sig", Format: "hex", Decode: Hex}
	body := []byte(`{"id":1}`)
	mac := func(key []byte) []byte { return HMACSHA256(key, body) }
	good := hex.EncodeToString(mac([]byte("new")))
	for _, tc := range []struct {
		value   string
		secrets [][]byte
		want    string
	}{
		{good, [][]byte{[]byte("old"), []byte("new")}, ""},
		{" " + strings.ToUpper(good) + " ", [][]byte{[]byte("new")}, ""},
		{good, [][]byte{[]byte("other")}, "signature matches no configured secret"},
		{"", [][]byte{[]byte("new")}, "missing X-Sig header"},
		{"zz", [][]byte{[]byte("new")}, "X-Sig header is not hex"},
		{good, [][]byte{nil, {}}, "no webhook secret configured"},
	} {
		if got := s.Verify(tc.value, tc.secrets, mac); got != tc.want {
			t.Errorf("Verify(%q) = %q, want %q", tc.value, got, tc.want)
		}
	}
}

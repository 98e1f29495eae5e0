package netguard

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestCheckURL(t *testing.T) {
	p := Policy{}
	refused := []string{
		"ftp://example.com/a.mp4",
		"file:///etc/passwd",
		"http://127.0.0.1/a.jpg",
		"http://[::1]/a.jpg",
		"http://[::ffff:127.0.0.1]/a.jpg",          // IPv4-mapped loopback
		"http://[::ffff:10.0.0.1]/a.jpg",           // IPv4-mapped private
		"http://169.254.169.254/latest/meta-data/", // cloud metadata
		"http://[fe80::1]/x",
		"http://10.1.2.3/x",
		"http://192.168.0.10/x",
		"http://172.16.5.4/x",
		"http://100.64.0.1/x",
		"http://0.0.0.0/x",
		"http://localhost:8080/x",
		"http://api.localhost/x",
		"https://user:pw@example.com/x",
		"http:///nohost",
		"not a url at all\x7f",
		"http://[64:ff9b::a00:1]/x", // NAT64 of 10.0.0.1
		"http://[::a9fe:a9fe]/x",    // IPv4-compatible 169.254.169.254
		"http://[::7f00:1]/x",       // IPv4-compatible 127.0.0.1
		"http://[::ffff:0:a00:1]/x", // SIIT IPv4-translated 10.0.0.1
		"http://2130706433/x",       // 127.0.0.1 as one number
		"http://0177.0.0.1/x",       // octal
		"http://0x7f.0.0.1/x",       // hex
		"http://127.1/x",            // short form
		"http://0xa9fea9fe/x",       // 169.254.169.254
		"http://10.1/x",
		// A trailing dot (a fully qualified name) is one a resolver ignores: "192.168.1.1." is
		// 192.168.1.1 to getaddrinfo and to WHATWG URL parsers.
		"http://192.168.1.1./x",
		"http://127.1./x",
		"http://0x7f.1./x",
		"http://2130706433./x",
		"http://127.0.0.1.:8080/x",
		"http://169.254.169.254./latest",
	}
	for _, raw := range refused {
		if _, err := p.CheckURL(raw); err == nil {
			t.Errorf("CheckURL(%q) accepted a URL it must refuse", raw)
		}
	}
	for _, raw := range []string{"https://cdn.example.com/face.jpg", "http://93.184.216.34/v.mp4", "https://[2606:4700::1]/x",
		"http://1570309390/x", "https://123.example.com/x", "http://deadbeef.cafe/x",
		"https://cdn.example.com./face.jpg", "http://93.184.216.34./v.mp4", "http://1570309390./x"} {
		if _, err := p.CheckURL(raw); err != nil {
			t.Errorf("CheckURL(%q) = %v, want accepted", raw, err)
		}
	}
}

func TestAllowListOpensPrivateRanges(t *testing.T) {
	allow, err := ParseAllowList("127.0.0.0/8, 10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{Allow: allow}
	for _, raw := range []string{"http://127.0.0.1:9000/x", "http://localhost/x", "http://10.1.2.3/x", "http://[::ffff:127.0.0.1]/x"} {
		if _, err := p.CheckURL(raw); err != nil {
			t.Errorf("CheckURL(%q) with allow-list = %v", raw, err)
		}
	}
	if _, err := p.CheckURL("http://10.1.2.4/x"); err == nil {
		t.Error("an address outside the allow-list was accepted")
	}
	if _, err := ParseAllowList("10.0.0.0/33"); err == nil {
		t.Error("a bad CIDR was accepted")
	}
}

// The dialer checks the address actually connected to, so a public-looking name that
// resolves to loopback is refused.
func TestDialerRefusesLoopbackAfterResolution(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	guarded := &http.Client{Transport: &http.Transport{DialContext: Policy{}.DialContext(time.Second)}}
	_, err := guarded.Get("http://localhost:" + port + "/")
	if !errors.Is(err, ErrForbiddenDestination) {
		t.Fatalf("GET via localhost = %v, want ErrForbiddenDestination", err)
	}

	allowed := Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	open := &http.Client{Transport: &http.Transport{DialContext: allowed.DialContext(time.Second)}}
	resp, err := open.Get("http://localhost:" + port + "/")
	if err != nil {
		t.Fatalf("GET with loopback allowed: %v", err)
	}
	resp.Body.Close()
}

// A refused literal address is told apart from a name that resolved to one: the first can
// never be called, the second may be re-pointed.
func TestDialerTellsALiteralAddressFromAResolvedName(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	guarded := &http.Client{Transport: &http.Transport{DialContext: Policy{}.DialContext(time.Second)}}

	for _, host := range []string{"127.0.0.1", "[::1]", "[::ffff:127.0.0.1]"} {
		_, err := guarded.Get("http://" + host + ":" + port + "/")
		var literal *LiteralAddressError
		if !errors.As(err, &literal) || !errors.Is(err, ErrForbiddenDestination) {
			t.Errorf("GET via %s = %v, want a LiteralAddressError that is an ErrForbiddenDestination", host, err)
		}
	}
	_, err := guarded.Get("http://localhost:" + port + "/")
	var literal *LiteralAddressError
	if errors.As(err, &literal) || !errors.Is(err, ErrForbiddenDestination) {
		t.Errorf("GET via localhost = %v, want ErrForbiddenDestination without a LiteralAddressError", err)
	}

	allowed := Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	open := &http.Client{Transport: &http.Transport{DialContext: allowed.DialContext(time.Second)}}
	resp, err := open.Get("http://127.0.0.1:" + port + "/")
	if err != nil {
		t.Fatalf("GET 127.0.0.1 with loopback allowed: %v", err)
	}
	resp.Body.Close()
}

func TestParseInetAton(t *testing.T) {
	for in, want := range map[string]string{
		"2130706433": "127.0.0.1", "0177.0.0.1": "127.0.0.1", "0x7f.0.0.1": "127.0.0.1", "127.1": "127.0.0.1",
		"10.1": "10.0.0.1", "192.168.257": "192.168.1.1", "0": "0.0.0.0", "0x0A.0": "10.0.0.0",
	} {
		got, ok := parseInetAton(in)
		if !ok || got.String() != want {
			t.Errorf("parseInetAton(%q) = %v, %v; want %s", in, got, ok, want)
		}
	}
	for _, in := range []string{"example.com", "1.2.3.4.5", "256.1.1.1", "08.1.1.1", "0x", "1.2.3.256", "4294967296", "", "a.b"} {
		if got, ok := parseInetAton(in); ok {
			t.Errorf("parseInetAton(%q) = %v, want not an address", in, got)
		}
	}
}

// Hosts are read the way a resolver reads them (IDNA, UTS #46) before they are checked: an
// ideographic full stop is a dot and full-width letters fold to ASCII, so these are the
// addresses and names they look like.
func TestCheckURLNormalisesHostsBeforeChecking(t *testing.T) {
	p := Policy{}
	for _, raw := range []string{
		"http://169。254。169。254/x.jpg", // ideographic full stops
		"http://169．254．169．254/x.jpg", // full-width full stops
		"http://%E3%80%82/x",           // a host that is only a dot
		"http://ＬＯＣＡＬＨＯＳＴ/x",
		"http://①②⑦.0.0.1/x",
		"http://１２７.0.0.1/x",
		"http://api.ｌｏｃａｌｈｏｓｔ/x",
	} {
		if _, err := p.CheckURL(raw); err == nil {
			t.Errorf("CheckURL(%q) accepted a URL it must refuse", raw)
		}
	}
	for raw, want := range map[string]string{
		"https://bücher.example/cover.jpg":      "https://xn--bcher-kva.example/cover.jpg",
		"https://CDN.Example.com:8443/f.jpg":    "https://cdn.example.com:8443/f.jpg",
		"https://cdn.example.com/a%2Fb.jpg?x=1": "https://cdn.example.com/a%2Fb.jpg?x=1",
		"https://my_host.example.com/f.jpg":     "https://my_host.example.com/f.jpg",
		"https://[2606:4700::1]:443/x":          "https://[2606:4700::1]:443/x",
	} {
		u, err := p.CheckURL(raw)
		if err != nil {
			t.Errorf("CheckURL(%q) = %v, want accepted", raw, err)
			continue
		}
		if u.String() != want {
			t.Errorf("CheckURL(%q) = %q, want %q", raw, u.String(), want)
		}
	}
}

func TestCheckURLRefusesInvalidPorts(t *testing.T) {
	p := Policy{}
	for _, raw := range []string{"https://cdn.example.com:0/f.jpg", "https://cdn.example.com:99999/f.jpg",
		"https://cdn.example.com:65536/f.jpg", "https://cdn.example.com:00000000000000000080/f.jpg", "https://[2606:4700::1]:0/x"} {
		if _, err := p.CheckURL(raw); err == nil {
			t.Errorf("CheckURL(%q) accepted an invalid port", raw)
		}
	}
	for _, raw := range []string{"https://cdn.example.com:1/f.jpg", "https://cdn.example.com:65535/f.jpg", "https://cdn.example.com:/f.jpg"} {
		if _, err := p.CheckURL(raw); err != nil {
			t.Errorf("CheckURL(%q) = %v, want accepted", raw, err)
		}
	}
}

// Refusals are shown to callers: whatever part of the URL is wrong, it comes back cut to 64
// bytes with its length said.
func TestRefusalsQuoteLongValuesCut(t *testing.T) {
	long := strings.Repeat("9", 100)
	for _, raw := range []string{
		strings.Repeat("s", 100) + "://cdn.example.com/f.jpg",           // scheme
		"https://cdn.example.com:" + long + "/f.jpg",                    // numeric port
		"https://cdn.example.com:" + strings.Repeat("p", 99) + "/f.jpg", // url.Parse's port error
		"http://0x" + strings.Repeat("0", 94) + "7f.1/x",                // a forbidden host
	} {
		_, err := Policy{}.CheckURL(raw)
		if err == nil || !strings.Contains(err.Error(), "(100 bytes)") || len(err.Error()) > 200 {
			t.Errorf("CheckURL(%.40q…) = %v, want the value cut to 64 bytes with \"(100 bytes)\"", raw, err)
		}
	}
}

// A value without a scheme ("cdn.example.com/f.jpg", a relative path) is not a URL at all: the
// refusal says what to send, not `not ""`, which reads as if the field had been left empty.
func TestCheckURLSaysWhatAValueWithoutASchemeLacks(t *testing.T) {
	for _, raw := range []string{"notaurl", "cdn.example.com/hook", "/relative/path", "c.jpg", "//cdn.example.com/f.jpg"} {
		_, err := Policy{}.CheckURL(raw)
		if err == nil {
			t.Fatalf("CheckURL(%q) accepted a value without a scheme", raw)
		}
		if strings.Contains(err.Error(), `""`) || !strings.Contains(err.Error(), "http://") {
			t.Errorf("CheckURL(%q) = %q, want a message naming the missing http:// or https://, not an empty quoted scheme", raw, err)
		}
	}
	if _, err := (Policy{}).CheckURL("ftp://cdn.example.com/f.jpg"); err == nil || !strings.Contains(err.Error(), `not "ftp"`) {
		t.Errorf(`CheckURL("ftp://…") = %v, want it to name the scheme "ftp"`, err)
	}
}

// Every special-purpose range IANA marks not globally reachable is refused, not only those
// netip's predicates know: before, a webhook_url or face URL at a documentation or
// benchmarking address, 6to4's relay anycast, a discard-only prefix or a Teredo address (which
// embeds an IPv4, as 6to4 does) was taken as public. Their public neighbours stay allowed.
func TestCheckURLRefusesSpecialPurposeRanges(t *testing.T) {
	p := Policy{}
	for _, raw := range []string{
		"http://192.0.2.1/x",                              // TEST-NET-1
		"http://198.51.100.7/x",                           // TEST-NET-2
		"http://203.0.113.200/x",                          // TEST-NET-3
		"http://192.88.99.1/x",                            // 6to4 relay anycast
		"http://[100::1]/x",                               // discard-only
		"http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/x", // Teredo, client 10.0.0.1
		"http://[2001:2::1]/x",                            // benchmarking
		"http://[2001:10::1]/x",                           // ORCHID
		"http://[2001:db8::1]/x",                          // documentation
		"http://[3fff::1]/x",                              // documentation
		"http://[5f00::1]/x",                              // SRv6 SID
		"http://[::ffff:192.0.2.1]/x",                     // IPv4-mapped TEST-NET-1
		"http://3221225985/x",                             // 192.0.2.1 as one number
	} {
		if _, err := p.CheckURL(raw); !errors.Is(err, ErrForbiddenDestination) {
			t.Errorf("CheckURL(%q) = %v, want %v", raw, err, ErrForbiddenDestination)
		}
	}
	for _, raw := range []string{"http://192.0.3.1/x", "http://198.51.101.1/x", "http://203.0.114.1/x",
		"http://192.88.100.1/x", "https://[2001:4860:4860::8888]/x", "https://[2001:200::1]/x", "https://[2606:4700::1]/x"} {
		if _, err := p.CheckURL(raw); err != nil {
			t.Errorf("CheckURL(%q) = %v, want accepted", raw, err)
		}
	}
}

package netguard

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"
)

// Found by a review of the /v1 REST API and webhook_url deliveries: an IPv6
// literal written with a zone (RFC 6874: http://[64:ff9b::a9fe:a9fe%251]/) passed every check,
// at submission and when connecting, if its address is one of the non-public ranges that only
// the nonPublic list refuses: NAT64 (64:ff9b::/96, 64:ff9b:1::/48), 6to4 (2002::/16),
// IPv4-compatible (::/96), SIIT (::ffff:0:0:0/96) and site-local (fec0::/10). netip.Prefix's
// Contains is false for any zoned address, so the list never matched; the predicates
// (IsPrivate, IsLoopback, IsLinkLocalUnicast …) ignore the zone, which is why fe80::1%eth0
// was refused and these were not.
//
// Input: one POST /v1/videos/template {"webhook_url":"http://[64:ff9b::a9fe:a9fe%251]/latest/meta-data/", …}
// (or the same as a face, video or short template URL). Nothing races: url.Parse reads the zone,
// CheckURL stores the URL as is, and the manager's guarded dialer (the same AllowedAddr) lets the
// connection through; Linux ignores the scope id of an address that is not link-local, so on a
// cluster with NAT64 (IPv6-only nodes) the POST reaches 169.254.169.254, the cloud metadata
// service. What the user (the attacker) saw: 202 and a task whose completion webhook (or
// whose worker's fetch) is sent to the metadata address, where docs/api.md promises
// "NAT64, 6to4 and other non-public addresses, in any notation, are refused".
//
// Want: refused as the same address without its zone, at CheckURL, by the dialer's check of
// the address it connects to, and by DialContext as a literal (so a webhook to it stops).
func TestAZonedNonPublicAddressIsRefused(t *testing.T) {
	zoned := map[string]string{
		"NAT64 of the metadata address":       "64:ff9b::a9fe:a9fe%1",
		"local-use NAT64":                     "64:ff9b:1::a9fe:a9fe%1",
		"6to4 of the metadata address":        "2002:a9fe:a9fe::1%eth0",
		"IPv4-compatible metadata address":    "::a9fe:a9fe%1",
		"SIIT IPv4-translated metadata":       "::ffff:0:a9fe:a9fe%1",
		"site-local":                          "fec0::1%1",
		"link-local (held before, a control)": "fe80::1%eth0",
	}
	for what, addr := range zoned {
		if u, err := (Policy{}).CheckURL("http://[" + escapeZone(addr) + "]/latest/meta-data/"); !errors.Is(err, ErrForbiddenDestination) {
			t.Errorf("%s: CheckURL = %v, %v; want ErrForbiddenDestination", what, u, err)
		}
		if err := (Policy{}).Dialer(time.Second).Control("tcp6", "["+addr+"]:80", nil); !errors.Is(err, ErrForbiddenDestination) {
			t.Errorf("%s: the dialer's check = %v; want ErrForbiddenDestination", what, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		conn, err := Policy{}.DialContext(time.Second)(ctx, "tcp", "["+addr+"]:80")
		cancel()
		if conn != nil {
			conn.Close()
		}
		if literal := (*LiteralAddressError)(nil); !errors.As(err, &literal) {
			t.Errorf("%s: DialContext = %v; want a LiteralAddressError (a webhook to it stops)", what, err)
		}
	}
	// A zone does not hide an allowed range either way: allowing NAT64 allows it zoned.
	open := Policy{Allow: mustPrefixes(t, "64:ff9b::/96")}
	if _, err := open.CheckURL("http://[64:ff9b::a9fe:a9fe%251]/"); err != nil {
		t.Errorf("NAT64 allowed, zoned: %v", err)
	}
}

func escapeZone(addr string) string {
	for i := range addr {
		if addr[i] == '%' {
			return addr[:i] + "%25" + addr[i+1:]
		}
	}
	return addr
}

func mustPrefixes(t *testing.T, s string) []netip.Prefix {
	t.Helper()
	p, err := ParseAllowList(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

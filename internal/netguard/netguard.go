// Package netguard keeps the service from being used to reach private networks (SSRF): URLs
// that callers hand us are fetched by generation backends and webhook deliveries, so loopback,
// private, link-local (cloud metadata) and other non-public destinations are refused unless an
// operator allows them explicitly.
//
// CheckURL refuses what can be seen in a URL; the Dialer refuses at connect time, after DNS
// resolution, so a hostname that resolves (or re-resolves) to a private address is caught too.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/idna"

	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// ErrForbiddenDestination is wrapped by every refusal of an address.
var ErrForbiddenDestination = errors.New("destination is not a public address")

// Policy says which destinations are allowed. The zero value allows public addresses only.
type Policy struct {
	// Allow lists networks that are allowed even though they are not public (for a local
	// stack, tests, or a model server on a private network).
	Allow []netip.Prefix
}

// ParseAllowList parses a comma-separated list of CIDRs or IPs, e.g. "127.0.0.0/8,10.1.2.3".
func ParseAllowList(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			addr, err := netip.ParseAddr(part)
			if err != nil {
				return nil, fmt.Errorf("allow-list entry %q: %w", part, err)
			}
			out = append(out, netip.PrefixFrom(addr, addr.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("allow-list entry %q: %w", part, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// nonPublic are ranges that are never public destinations beyond what netip's predicates cover.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64, could embed a private IPv4
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2002::/16"),       // 6to4, could embed a private IPv4
	netip.MustParsePrefix("fec0::/10"),       // deprecated site-local
	netip.MustParsePrefix("::/96"),           // deprecated IPv4-compatible (::127.0.0.1), could embed a private IPv4
	netip.MustParsePrefix("::ffff:0:0:0/96"), // SIIT IPv4-translated (RFC 2765), could embed a private IPv4
	// The rest of IANA's special-purpose ranges that are not globally reachable (RFC 6890's
	// registries) and that netip's predicates pass as global unicast: no receiver or media host
	// is there, and Teredo embeds an IPv4 as 6to4 does.
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation (TEST-NET-1)
	netip.MustParsePrefix("198.51.100.0/24"), // documentation (TEST-NET-2)
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation (TEST-NET-3)
	netip.MustParsePrefix("192.88.99.0/24"),  // deprecated 6to4 relay anycast (RFC 7526)
	netip.MustParsePrefix("100::/64"),        // discard-only (RFC 6666)
	netip.MustParsePrefix("2001::/32"),       // Teredo, could embed a private IPv4
	netip.MustParsePrefix("2001:2::/48"),     // benchmarking
	netip.MustParsePrefix("2001:10::/28"),    // deprecated ORCHID
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("3fff::/20"),       // documentation (RFC 9637)
	netip.MustParsePrefix("5f00::/16"),       // SRv6 SIDs (RFC 9602)
}

// AllowedAddr reports whether a connection to addr is allowed.
func (p Policy) AllowedAddr(addr netip.Addr) bool {
	// ::ffff:127.0.0.1 is 127.0.0.1; and a zone (fe80::1%eth0) names an interface, not another
	// address: netip.Prefix.Contains is false for any zoned address, so without this
	// [64:ff9b::a9fe:a9fe%251] would pass the nonPublic list (Linux ignores the scope id of an
	// address that is not link-local, and connects).
	addr = addr.WithZone("").Unmap()
	for _, a := range p.Allow {
		if a.Contains(addr) {
			return true
		}
	}
	if !addr.IsValid() || addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() ||
		addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast() || addr.IsMulticast() || addr.IsUnspecified() {
		return false
	}
	for _, n := range nonPublic {
		if n.Contains(addr) {
			return false
		}
	}
	return true
}

// CheckURL parses raw and refuses anything but an absolute http(s) URL with a valid port whose
// host is not a forbidden literal address or a name that always means this machine. The URL it
// returns has its host in the ASCII form a resolver uses (IDNA): store that one, so what was
// checked is what is fetched.
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // without the URL, which the caller has
			err = ue.Err
		}
		return nil, fmt.Errorf("not a valid URL: %s", echoQuoted(err.Error()))
	}
	if u.Scheme == "" { // a host and path, or a relative reference: there is no scheme to name
		return nil, errors.New("must be an absolute URL starting with http:// or https://")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("must be an http or https URL, not %s", httpjson.Echo(u.Scheme))
	}
	if u.User != nil {
		return nil, errors.New("must not carry credentials")
	}
	if err := normaliseHost(u); err != nil {
		return nil, err
	}
	// One trailing dot (a fully qualified name) is dropped by resolvers and WHATWG URL parsers
	// alike: "192.168.1.1." is 192.168.1.1, so every check below sees the host without it.
	host := strings.TrimSuffix(u.Hostname(), ".")
	if addr, err := netip.ParseAddr(host); err == nil {
		if !p.AllowedAddr(addr) {
			return nil, fmt.Errorf("%w: %s", ErrForbiddenDestination, httpjson.Echo(host))
		}
		return u, nil
	}
	// 2130706433, 0177.0.0.1, 0x7f.0.0.1 and 127.1 are not IP literals to Go, but C's
	// inet_aton (and so curl, Python and most model servers) reads them as 127.0.0.1.
	if addr, ok := parseInetAton(host); ok {
		if !p.AllowedAddr(addr) {
			return nil, fmt.Errorf("%w: %s (%s)", ErrForbiddenDestination, httpjson.Echo(host), addr)
		}
		return u, nil
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		if !p.AllowedAddr(netip.MustParseAddr("127.0.0.1")) {
			return nil, fmt.Errorf("%w: %s", ErrForbiddenDestination, httpjson.Echo(host))
		}
	}
	return u, nil
}

// quoted finds the Go-quoted values that net/url and idna put in their errors.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// echoQuoted cuts every quoted value in a library's error message as httpjson.Echo does:
// refusals end up in API answers, which quote a caller's value cut to a few dozen bytes.
func echoQuoted(msg string) string {
	return quoted.ReplaceAllStringFunc(msg, func(q string) string {
		if v, err := strconv.Unquote(q); err == nil {
			return httpjson.Echo(v)
		}
		return q
	})
}

// hostNames maps a host name as resolvers do (UTS #46: "。" is a dot, full-width and
// circled characters fold to ASCII, letters to lower case). Underscores stay allowed: real
// hosts have them, and the result is only checked, not registered.
var hostNames = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.StrictDomainName(false))

// normaliseHost rewrites u.Host into the form that will be resolved, and refuses ports
// outside 1–65535 (or written with leading zeros, which parsers read differently).
func normaliseHost(u *url.URL) error {
	host, port := u.Hostname(), u.Port()
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return fmt.Errorf("has an invalid port %s: use 1 to 65535", httpjson.Echo(port))
		}
	}
	if strings.HasPrefix(u.Host, "[") { // an IPv6 literal; url.Parse checked its form
		return nil
	}
	ascii, err := hostNames.ToASCII(host)
	if err != nil {
		return fmt.Errorf("has an invalid host name: %s", echoQuoted(err.Error()))
	}
	if strings.Trim(ascii, ".") == "" {
		return errors.New("has no host")
	}
	// What a resolver can look up (RFC 1035 §2.3.4; the profile above does not check lengths):
	// no empty label, none over 63 bytes, at most 253 bytes but for one trailing dot.
	name := strings.TrimSuffix(ascii, ".")
	if len(name) > 253 {
		return fmt.Errorf("has a host name of %d bytes: at most 253", len(name))
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("has an invalid host name %s: each dot-separated label must have 1 to 63 bytes", httpjson.Echo(ascii))
		}
	}
	if port != "" {
		ascii += ":" + port
	}
	u.Host = ascii
	return nil
}

// parseInetAton reads the IPv4 forms inet_aton accepts: one to four dot-separated parts, each
// decimal, octal (leading 0) or hex (0x), the last part filling the remaining bytes.
func parseInetAton(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, part := range parts {
		base, digits := 10, part
		switch {
		case strings.HasPrefix(strings.ToLower(part), "0x"):
			base, digits = 16, part[2:]
		case len(part) > 1 && part[0] == '0':
			base, digits = 8, part[1:]
		}
		if digits == "" && base != 8 {
			return netip.Addr{}, false
		}
		if digits == "" {
			digits = "0"
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	last := len(vals) - 1
	for i, v := range vals[:last] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n |= v << (24 - 8*uint(i))
	}
	if limit := uint64(1)<<(32-8*uint(last)) - 1; vals[last] > limit {
		return netip.Addr{}, false
	}
	n |= vals[last]
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// Dialer returns a net.Dialer that refuses connections to forbidden addresses after DNS
// resolution, the only point where a rebinding hostname can be caught.
func (p Policy) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{
		Timeout: timeout,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("netguard: unexpected address %q: %w", address, err)
			}
			if !p.AllowedAddr(ap.Addr()) {
				return fmt.Errorf("%w: %s", ErrForbiddenDestination, ap.Addr())
			}
			return nil
		},
	}
}

// LiteralAddressError refuses an address written in the URL itself (http://10.0.0.1/), not one
// a host name resolved to: nothing outside the policy can make it public, so calling again is
// useless, whereas a name may be re-pointed. It is an ErrForbiddenDestination.
type LiteralAddressError struct {
	Addr netip.Addr
}

func (e *LiteralAddressError) Error() string {
	return fmt.Sprintf("%s: %s", ErrForbiddenDestination, e.Addr)
}

// Is makes errors.Is(err, ErrForbiddenDestination) hold, as for every refusal.
func (e *LiteralAddressError) Is(target error) bool { return target == ErrForbiddenDestination }

// DialContext is Dialer(timeout).DialContext, for http.Transport, except that a forbidden
// literal address is refused before dialing with a LiteralAddressError, so callers can tell
// it from a name that resolved to a forbidden address.
func (p Policy) DialContext(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	dialer := p.Dialer(timeout)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			if ip, ok := literalAddr(host); ok && !p.AllowedAddr(ip) {
				return nil, &net.OpError{Op: "dial", Net: network, Err: &LiteralAddressError{Addr: ip}}
			}
		}
		return dialer.DialContext(ctx, network, addr)
	}
}

// literalAddr reads host as CheckURL does: an IP literal, with one trailing dot or not, or one
// of inet_aton's forms (2130706433, 0x7f.1). Such a host names its address outright, whatever
// a resolver makes of it.
func literalAddr(host string) (netip.Addr, bool) {
	host = strings.TrimSuffix(host, ".")
	if addr, err := netip.ParseAddr(host); err == nil {
		return addr, true
	}
	return parseInetAton(host)
}

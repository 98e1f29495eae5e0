package netguard

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
)

// What a task's caller reads must not show our resolver, our own address, or what a name
// resolved to through our DNS; the detail stays for logs.
func TestExplainKeepsOurNetworkOutOfTheMessage(t *testing.T) {
	lookup := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "example.com",
		Server: "10.255.255.53:53", IsNotFound: true}}
	refused := &net.OpError{Op: "dial", Net: "tcp", Source: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 40000},
		Addr: &net.TCPAddr{IP: net.ParseIP("93.184.216.34"), Port: 80}, Err: fmt.Errorf("connect: %w", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Source: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 40000},
		Addr: &net.TCPAddr{IP: net.ParseIP("93.184.216.34"), Port: 80}, Err: fmt.Errorf("read: %w", syscall.ECONNRESET)}
	forbidden := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP("10.96.0.10"), Port: 80},
		Err: fmt.Errorf("%w: %s", ErrForbiddenDestination, netip.MustParseAddr("10.96.0.10"))}
	for _, c := range []struct {
		err  error
		want string
	}{
		{lookup, "could not resolve host example.com: no such host"},
		{refused, "could not connect to the host: connection refused"},
		{reset, "the connection failed: connection reset by peer"},
		{&net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 443}, Err: timeoutError{}},
			"no answer before the timeout"},
		{forbidden, "destination is not a public address (what the host name resolves to)"},
	} {
		got := Explain(c.err)
		if got.Error() != c.want {
			t.Errorf("Explain(%v) = %q, want %q", c.err, got, c.want)
		}
		for _, internal := range []string{"10.255.255.53", "10.1.2.3", "10.96.0.10"} {
			if strings.Contains(got.Error(), internal) {
				t.Errorf("Explain(%v) = %q shows %s", c.err, got, internal)
			}
		}
		if pe, ok := got.(*PublicError); !ok || pe.Detail() != c.err.Error() {
			t.Errorf("Explain(%v) keeps no detail for logs", c.err)
		}
	}
	// An address the caller wrote in the URL is theirs: it is named, and no host name is implied.
	literal := &net.OpError{Op: "dial", Net: "tcp", Err: &LiteralAddressError{Addr: netip.MustParseAddr("10.0.0.1")}}
	if got := Explain(literal).Error(); got != "destination is not a public address: 10.0.0.1" {
		t.Errorf("Explain(%v) = %q", literal, got)
	}
	if other := fmt.Errorf("HTTP 404"); Explain(other) != other {
		t.Errorf("Explain changed an error that is not a network error")
	}
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

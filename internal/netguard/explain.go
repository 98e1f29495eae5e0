package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
)

// PublicError says why a request to a caller's URL failed in words fit for the caller: no
// address of our resolver, of our own end of a connection, or of what a name resolved to
// through our DNS (which can be a cluster's private name). The full error stays in Detail,
// for logs.
type PublicError struct {
	msg   string
	cause error
}

func (e *PublicError) Error() string { return e.msg }
func (e *PublicError) Unwrap() error { return e.cause }

// Detail is the full error, with every address: for logs only.
func (e *PublicError) Detail() string { return e.cause.Error() }

// Explain rewrites the network errors of a request to a caller's URL (a DNS lookup, a dial, a
// broken connection, a refusal after resolution) as a PublicError; any other error is returned
// as it is.
func Explain(err error) error {
	if msg := explain(err); msg != "" {
		return &PublicError{msg: msg, cause: err}
	}
	return err
}

func explain(err error) string {
	var (
		dnsErr  *net.DNSError
		opErr   *net.OpError
		netErr  net.Error
		literal *LiteralAddressError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &literal):
		// The caller wrote this address in the URL: naming it tells them nothing of ours.
		return literal.Error()
	case errors.Is(err, ErrForbiddenDestination):
		// A refusal at connect time after resolution: the address came from our resolver.
		return ErrForbiddenDestination.Error() + " (what the host name resolves to)"
	case errors.As(err, &dnsErr):
		return "could not resolve host " + dnsErr.Name + dnsOutcome(dnsErr)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "no answer before the timeout"
	case errors.As(err, &opErr):
		return connectionOutcome(opErr)
	}
	return ""
}

func dnsOutcome(e *net.DNSError) string {
	switch {
	case e.IsNotFound:
		return ": no such host"
	case e.IsTimeout:
		return ": timed out"
	}
	return ""
}

// connectionOutcome names what went wrong with a connection by its errno, without addresses.
func connectionOutcome(e *net.OpError) string {
	what := "the connection failed"
	if e.Op == "dial" {
		what = "could not connect to the host"
	}
	for _, known := range []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EHOSTUNREACH, syscall.ENETUNREACH} {
		if errors.Is(e.Err, known) {
			return fmt.Sprintf("%s: %s", what, known.Error())
		}
	}
	return what
}

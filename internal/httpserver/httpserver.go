// Package httpserver builds the project's HTTP servers (the REST apiserver with its webhook
// ingress, Event Service and blob store; the reference worker): deadlines for reading a
// request's headers and its body on every listener, so a client that trickles bytes cannot
// hold a connection open, and the answers net/http writes on its own before any handler runs
// (431 for oversized headers, 400 for a malformed request) in the API's error envelope
// instead of plain text.
package httpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// Timeouts bound how long a client may take to send a request.
type Timeouts struct {
	// ReadHeader bounds the request line and headers.
	ReadHeader time.Duration
	// Read bounds the whole request, body included (a 16 MiB upload must fit in it).
	Read time.Duration
	// Idle bounds a kept-alive connection waiting for its next request.
	Idle time.Duration
}

// DefaultTimeouts are the flags' defaults.
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: 10 * time.Second, Read: time.Minute, Idle: 2 * time.Minute}
}

// Bind registers --read-header-timeout and --read-timeout, with t's values as defaults.
func (t *Timeouts) Bind(fs *flag.FlagSet) {
	fs.DurationVar(&t.ReadHeader, "read-header-timeout", t.ReadHeader, "How long a client may take to send a request's headers.")
	fs.DurationVar(&t.Read, "read-timeout", t.Read, "How long a client may take to send a whole request, body included; a slower one is cut off (408).")
}

// Check refuses timeouts that would leave a reader without a deadline.
func (t Timeouts) Check() error {
	if t.ReadHeader <= 0 || t.Read <= 0 {
		return errors.New("--read-header-timeout and --read-timeout must be positive")
	}
	if t.ReadHeader > t.Read {
		return errors.New("--read-header-timeout must not exceed --read-timeout")
	}
	return nil
}

// ShutdownTimeout bounds the REST apiserver's graceful shutdown: how long requests in flight may
// take to finish once it stopped accepting. Its pod's terminationGracePeriodSeconds covers it,
// after the apiserver's --shutdown-delay.
const ShutdownTimeout = 15 * time.Second

// DefaultShutdownDelay is the REST apiserver's --shutdown-delay by default: how long it serves
// on after SIGTERM, with /readyz failing, for the kubelet's readiness probe to fail and the
// endpoints, kube-proxy and Ingress controllers to stop routing to it.
const DefaultShutdownDelay = 5 * time.Second

// MaxHeaderBytes bounds the request line and headers (net/http's default); a larger request
// is answered 431 in the error envelope.
const MaxHeaderBytes = 1 << 20

// New returns a server for handler on addr with the deadlines of t.
func New(addr string, handler http.Handler, t Timeouts) *http.Server {
	idle := t.Idle
	if idle <= 0 {
		idle = DefaultTimeouts().Idle
	}
	return &http.Server{Addr: addr, Handler: handler, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read,
		IdleTimeout: idle, MaxHeaderBytes: MaxHeaderBytes}
}

// ListenAndServe is srv.ListenAndServe with net/http's own error answers in the envelope.
func ListenAndServe(srv *http.Server) error {
	l, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		return err
	}
	return srv.Serve(Listener(l))
}

// Listener wraps l so that the plain-text answers net/http writes straight to a connection
// (before a request reaches any handler) go out in the error envelope.
func Listener(l net.Listener) net.Listener { return envelopeListener{l} }

type envelopeListener struct{ net.Listener }

func (l envelopeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &envelopeConn{Conn: c}, nil
}

// earlyError is exactly what net/http's conn.serve writes for a request it cannot read: a
// status line, these two headers and a text body, in one Write. A handler's answer always
// carries a Date and a length, so it never looks like this.
var earlyError = regexp.MustCompile(`^HTTP/1\.[01] ([0-9]{3}) ([^\r\n]*)\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n([^\r\n]*)$`)

// expectationFailed is net/http's answer to an Expect header other than 100-continue: written
// before any handler runs, but as a response (a Date, an empty body), so earlyError misses it.
// No handler here answers 417.
var expectationFailed = regexp.MustCompile(`^HTTP/1\.[01] 417 Expectation Failed\r\n(?:(?:Connection: close|Date: [^\r\n]*|Content-Length: 0)\r\n)*\r\n$`)

type envelopeConn struct{ net.Conn }

func (c *envelopeConn) Write(p []byte) (int, error) {
	var answer []byte
	if m := earlyError.FindSubmatch(p); m != nil {
		status, _ := strconv.Atoi(string(m[1]))
		answer = envelope(status, string(m[3]))
	} else if expectationFailed.Match(p) {
		answer = envelope(http.StatusExpectationFailed, "")
	} else {
		return c.Conn.Write(p)
	}
	if _, err := c.Conn.Write(answer); err != nil {
		return 0, err
	}
	return len(p), nil
}

// CloseWrite lets net/http half-close after a 431, as it does on a bare TCP connection.
func (c *envelopeConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom keeps sendfile for file downloads (blobs): body bytes need no rewriting.
func (c *envelopeConn) ReadFrom(r io.Reader) (int64, error) { return io.Copy(c.Conn, r) }

// envelope is a whole HTTP/1.1 response with status and the error body for text.
func envelope(status int, text string) []byte {
	code, message := httpjson.CodeInvalidRequest, text
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		code = httpjson.CodeHeadersTooLarge
		message = fmt.Sprintf("the request line and headers are larger than %d bytes", MaxHeaderBytes)
	case http.StatusNotImplemented:
		code = "not_implemented"
	case http.StatusExpectationFailed:
		message = "the Expect header may only be 100-continue: send none, or 100-continue"
	}
	id := httpjson.NewRequestID()
	body, _ := json.Marshal(httpjson.ErrorBody(code, message, id))
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n%s: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n",
		status, http.StatusText(status), httpjson.HeaderRequestID, id, len(body)+1)
	b.Write(body)
	b.WriteByte('\n')
	return b.Bytes()
}

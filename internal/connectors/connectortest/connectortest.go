// Package connectortest is the conformance harness every connector's fuzz test runs: whatever
// bytes arrive, a connector answers with an event, a ParseError or an AuthError (never a panic
// or another error), and a correctly signed body that parses gives a complete event. It is
// test support: only _test.go files import it.
package connectortest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
)

// Input is one fuzz input as a connector sees it.
type Input struct {
	Conn    connectors.Connector
	Secrets [][]byte
	// Sent is the request as it arrived: any signature, any body. Now is when it arrived.
	Sent *connectors.Request
	Now  time.Time
	// Signed is the same body signed correctly with Secrets (nil: the connector's fuzz test
	// checks signed bodies elsewhere), verified by SignedConn (default Conn) at SignedAt
	// (default Now).
	Signed     *connectors.Request
	SignedConn connectors.Connector
	SignedAt   time.Time
}

// Check runs the three looks at one input: Handle on the request as sent, Parse on its body
// alone, and Handle on the correctly signed body.
func (in Input) Check(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	_, err := connectors.HandleWith(ctx, in.Conn, in.Sent, in.Secrets, "", in.Now)
	CheckErr(t, err, true)
	_, err = in.Conn.Parse(&connectors.Request{Body: in.Sent.Body})
	CheckErr(t, err, false)
	if in.Signed == nil {
		return
	}
	conn, at := in.SignedConn, in.SignedAt
	if conn == nil {
		conn = in.Conn
	}
	if at.IsZero() {
		at = in.Now
	}
	ev, err := connectors.HandleWith(ctx, conn, in.Signed, in.Secrets, "", at)
	CheckErr(t, err, false)
	if err == nil && (ev.Type == "" || ev.MerchantEventID == "") {
		t.Fatalf("incomplete event %+v", ev)
	}
}

// CheckErr fails t unless err is nil, a ParseError, or (when authAllowed) an AuthError.
func CheckErr(t *testing.T, err error, authAllowed bool) {
	t.Helper()
	var authErr *connectors.AuthError
	var parseErr *connectors.ParseError
	switch {
	case err == nil, errors.As(err, &parseErr):
	case authAllowed && errors.As(err, &authErr):
	default:
		t.Fatalf("unexpected error %T: %v", err, err)
	}
}

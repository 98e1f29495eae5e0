package connectors

import "errors"

// ErrUnknownConnector is wrapped by the error Lookup and Handle return for a
// connector name that is not registered.
var ErrUnknownConnector = errors.New("connectors: unknown connector")

// AuthError means the webhook could not be authenticated: missing or
// malformed signature header, timestamp outside tolerance, no matching
// signature, or no secret configured. The RPC layer maps it to
// Unauthenticated.
type AuthError struct {
	Connector string
	Reason    string
}

func (e *AuthError) Error() string {
	return "connectors: " + e.Connector + ": webhook not authenticated: " + e.Reason
}

// ParseError means the body could not be parsed into an event. The RPC layer
// maps it to InvalidArgument.
type ParseError struct {
	Connector string
	Err       error
}

func (e *ParseError) Error() string {
	msg := "connectors: " + e.Connector + ": cannot parse webhook body"
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *ParseError) Unwrap() error { return e.Err }

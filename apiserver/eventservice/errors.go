package eventservice

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

var (
	// ErrInvalidRequest is wrapped by errors for requests missing a required
	// part (connector name, request details, body).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrSecretsUnavailable is wrapped when the SecretSource failed, as
	// opposed to having no secret for the connector.
	ErrSecretsUnavailable = errors.New("webhook secrets unavailable")
	// errInternal marks failures that are the server's fault.
	errInternal = errors.New("internal error")
)

// ErrorCode classifies an error from Service.HandleWebhook (or Handle):
//
//   - *connectors.AuthError (bad signature, no secret): Unauthenticated
//   - *connectors.ParseError, ErrInvalidRequest: InvalidArgument
//   - connectors.ErrUnknownConnector: NotFound
//   - ErrSecretsUnavailable: Unavailable
//   - context cancellation and deadline: Canceled, DeadlineExceeded
//   - anything else, including a connector panic: Internal
func ErrorCode(err error) connect.Code {
	var authErr *connectors.AuthError
	var parseErr *connectors.ParseError
	switch {
	case errors.As(err, &authErr):
		return connect.CodeUnauthenticated
	case errors.As(err, &parseErr), errors.Is(err, ErrInvalidRequest):
		return connect.CodeInvalidArgument
	case errors.Is(err, connectors.ErrUnknownConnector):
		return connect.CodeNotFound
	case errors.Is(err, ErrSecretsUnavailable):
		return connect.CodeUnavailable
	case errors.Is(err, context.Canceled):
		return connect.CodeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return connect.CodeDeadlineExceeded
	}
	return connect.CodeInternal
}

// connectError wraps err with its code. The messages of the connectors'
// errors name the connector and what was wrong, and carry no secret. They may
// quote what the caller sent (an Adyen item's pspReference, a header's name),
// so the message is cut to the apiserver's bound on an error message.
func connectError(err error) *connect.Error {
	return connect.NewError(ErrorCode(err), limitedError{err})
}

// limitedError is err with its message cut to httpjson.MaxMessageBytes.
type limitedError struct{ err error }

func (e limitedError) Error() string { return httpjson.LimitMessage(e.err.Error()) }
func (e limitedError) Unwrap() error { return e.err }

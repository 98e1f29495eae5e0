package eventservice

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1/eventsv1connect"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// DefaultReadMaxBytes caps one request message. Webhook bodies are a few
// kilobytes; 4 MiB is also gRPC's default limit.
const DefaultReadMaxBytes = 4 << 20

// NewHandler returns the path ("/videogen.events.v1.EventService/") and the
// handler serving svc over gRPC, gRPC-Web and Connect, with every call
// checked by auth. gRPC needs HTTP/2: serve over TLS, or enable h2c with
// http.Server.Protocols.SetUnencryptedHTTP2. opts are applied after the
// defaults, so they may override them.
func NewHandler(svc *Service, auth *TokenAuth, opts ...connect.HandlerOption) (string, http.Handler, error) {
	if svc == nil {
		return "", nil, errors.New("eventservice: nil Service")
	}
	if auth == nil {
		return "", nil, errNoToken
	}
	defaults := append([]connect.HandlerOption{
		connect.WithReadMaxBytes(DefaultReadMaxBytes),
		boundedGzipOption(),
		connect.WithRecover(svc.recoverHandler),
	}, codecs()...)
	path, h := eventsv1connect.NewEventServiceHandler(svc, append(defaults, opts...)...)
	service := eventsv1.File_videogen_events_v1_events_proto.Services().ByName("EventService")
	rpcs := newRPCRequests(service, h)
	return path, httpjson.WithRequestID(auth.wrap(answerNonRPC(rpcs, h), rpcs.isRPC)), nil
}

// recoverHandler turns a panic outside the connectors (which Service
// recovers itself) into Internal instead of a dropped connection.
func (s *Service) recoverHandler(ctx context.Context, spec connect.Spec, _ http.Header, r any) error {
	s.logger.ErrorContext(ctx, "eventservice: panic in handler", "procedure", spec.Procedure, "panic", r)
	return connect.NewError(connect.CodeInternal, errInternal)
}

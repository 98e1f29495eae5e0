package eventservice

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"

	"k8s.io/utils/clock"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/all"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// Service verifies and normalizes webhooks. It is safe for concurrent use.
type Service struct {
	registry *connectors.Registry
	secrets  SecretSource
	clock    clock.PassiveClock
	logger   *slog.Logger
}

// Option configures a Service.
type Option func(*Service)

// WithRegistry replaces the default registry (every connector with default
// options). Connectors that need configuration, such as Square's
// notification URL or Authorize.net's currency, are set up this way.
func WithRegistry(r *connectors.Registry) Option {
	return func(s *Service) {
		if r != nil {
			s.registry = r
		}
	}
}

// WithClock sets the clock that signed timestamps (Stripe's) are checked
// against.
func WithClock(c clock.PassiveClock) Option {
	return func(s *Service) {
		if c != nil {
			s.clock = c
		}
	}
}

// WithLogger sets where panics are reported (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(s *Service) {
		if l != nil {
			s.logger = l
		}
	}
}

// New returns a Service that verifies with the secrets src holds for a
// connector whenever a request carries none of its own. src may be nil, in
// which case every request must carry its secrets.
func New(src SecretSource, opts ...Option) (*Service, error) {
	s := &Service{secrets: src, clock: clock.RealClock{}, logger: slog.Default()}
	for _, opt := range opts {
		opt(s)
	}
	if s.registry == nil {
		r, err := connectors.NewRegistry(all.Connectors()...)
		if err != nil {
			return nil, err
		}
		s.registry = r
	}
	return s, nil
}

// HandleWebhook verifies and normalizes one delivery for the named connector
// with the connector's configured secrets; it is Handle without the RPC, for
// in-process callers. merchantEventID may be empty (see connectors.Handle).
// Errors are classified by ErrorCode.
func (s *Service) HandleWebhook(ctx context.Context, connector string, req *connectors.Request, merchantEventID string) (*connectors.Event, error) {
	return s.handle(ctx, connector, req, nil, merchantEventID)
}

// handle verifies with requestSecrets when any is usable, else with the
// configured ones.
func (s *Service) handle(ctx context.Context, name string, req *connectors.Request, requestSecrets [][]byte, merchantEventID string) (ev *connectors.Event, err error) {
	// Connectors promise not to panic; a panic must still not take the
	// server down or leave the caller without an answer.
	defer func() {
		if r := recover(); r != nil {
			s.logger.ErrorContext(ctx, "eventservice: panic while handling webhook",
				"connector", name, "panic", r, "stack", string(debug.Stack()))
			ev, err = nil, fmt.Errorf("%w: connector %q failed unexpectedly", errInternal, name)
		}
	}()

	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return nil, fmt.Errorf("%w: connector is required", ErrInvalidRequest)
	}
	c, err := s.registry.Lookup(name)
	if err != nil {
		// The name is the caller's: quoted cut, as the apiserver quotes a value.
		return nil, fmt.Errorf("%w: %s", connectors.ErrUnknownConnector, httpjson.Echo(name))
	}
	if req == nil || len(req.Body) == 0 {
		return nil, fmt.Errorf("%w: webhook body is empty", ErrInvalidRequest)
	}
	secrets := requestSecrets
	if !usable(secrets) {
		if secrets, err = s.configuredSecrets(name); err != nil {
			return nil, err
		}
	}
	if !usable(secrets) {
		return nil, &connectors.AuthError{Connector: name,
			Reason: "no webhook secret configured (none in the request, none configured for the connector)"}
	}
	return connectors.HandleWith(ctx, c, req, secrets, merchantEventID, s.clock.Now())
}

func (s *Service) configuredSecrets(connector string) ([][]byte, error) {
	if s.secrets == nil {
		return nil, nil
	}
	secrets, err := s.secrets.Secrets(connector)
	if err != nil {
		return nil, fmt.Errorf("%w for connector %q: %v", ErrSecretsUnavailable, connector, err)
	}
	return secrets, nil
}

func usable(secrets [][]byte) bool {
	for _, s := range secrets {
		if len(s) > 0 {
			return true
		}
	}
	return false
}

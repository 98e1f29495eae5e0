package connectors

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Connector authenticates and normalizes one processor's webhooks.
// Implementations must not panic on any input.
type Connector interface {
	// Name is the registry key, e.g. "stripe".
	Name() string
	// Verify authenticates req against the secrets; a signature made with any
	// one of them is accepted. now is used where the scheme signs a
	// timestamp. It returns nil, *AuthError or (when the signature lives in
	// an unparseable body) *ParseError.
	Verify(req *Request, secrets [][]byte, now time.Time) error
	// Parse maps a verified request onto an Event. It sets MerchantEventID
	// to the processor's own event id when the payload has one and leaves
	// it empty otherwise. It returns *ParseError for bodies it cannot parse.
	Parse(req *Request) (*Event, error)
}

// Registry maps connector names to connectors. The zero value is empty and
// ready to use; it is safe for concurrent use.
type Registry struct {
	mu         sync.RWMutex
	connectors map[string]Connector
}

// NewRegistry returns a registry holding cs.
func NewRegistry(cs ...Connector) (*Registry, error) {
	r := &Registry{}
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds c under c.Name(). Registering a name twice is an error so
// that a misconfigured connector cannot silently replace another.
func (r *Registry) Register(c Connector) error {
	if c == nil || c.Name() == "" {
		return errors.New("connectors: cannot register a nil or unnamed connector")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.connectors == nil {
		r.connectors = make(map[string]Connector)
	}
	if _, dup := r.connectors[c.Name()]; dup {
		return fmt.Errorf("connectors: connector %q already registered", c.Name())
	}
	r.connectors[c.Name()] = c
	return nil
}

// Lookup returns the connector registered under name, or an error wrapping
// ErrUnknownConnector.
func (r *Registry) Lookup(name string) (Connector, error) {
	r.mu.RLock()
	c, ok := r.connectors[name]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownConnector, name)
	}
	return c, nil
}

// Names returns the registered names in sorted order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.connectors))
	for name := range r.connectors {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// defaultRegistry backs the package-level functions; connectors/all fills it.
var defaultRegistry Registry

// Register adds c to the default registry.
func Register(c Connector) error { return defaultRegistry.Register(c) }

// Lookup finds a connector in the default registry.
func Lookup(name string) (Connector, error) { return defaultRegistry.Lookup(name) }

// Names lists the default registry.
func Names() []string { return defaultRegistry.Names() }

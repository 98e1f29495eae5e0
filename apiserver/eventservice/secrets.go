package eventservice

import "github.com/videogen-dev/videogen-operator/internal/connectors"

// SecretSource yields the webhook secrets configured for a connector: every
// secret currently accepted, so the new and the old one during a rotation.
// No secrets and a nil error mean none is configured. Secrets is called once
// per request and must be safe for concurrent use.
type SecretSource interface {
	Secrets(connector string) ([][]byte, error)
}

// SecretSourceFunc adapts a function to SecretSource.
type SecretSourceFunc func(connector string) ([][]byte, error)

// Secrets implements SecretSource.
func (f SecretSourceFunc) Secrets(connector string) ([][]byte, error) { return f(connector) }

// StaticSecrets is a fixed, in-memory SecretSource mapping connector names to
// their secrets, for tests and static configuration. Do not modify it while
// it is in use.
type StaticSecrets map[string][]string

// Secrets implements SecretSource.
func (s StaticSecrets) Secrets(connector string) ([][]byte, error) {
	return connectors.SecretsFromStrings(s[connector]...), nil
}

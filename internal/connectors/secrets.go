package connectors

// SecretsFromStrings converts webhook secrets held as strings into the byte
// form Handle takes. Order does not matter: a signature made with any of
// them is accepted, which is what lets a secret be rotated without
// rejecting deliveries signed with the old one.
func SecretsFromStrings(secrets ...string) [][]byte {
	out := make([][]byte, 0, len(secrets))
	for _, s := range secrets {
		out = append(out, []byte(s))
	}
	return out
}

// SecretChecker is implemented by a connector whose secrets have a form of their own (Adyen's
// HMAC key is hex), so that a tool can tell a configured secret the connector skips from one it
// verifies with. CheckSecret returns why secret cannot verify anything, or nil.
type SecretChecker interface {
	CheckSecret(secret []byte) error
}

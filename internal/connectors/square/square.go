// Package square verifies and normalizes Square webhooks.
//
// Scheme (https://developer.squareup.com/docs/webhooks/step3validate): the
// x-square-hmacsha256-signature header is
// base64(HMAC-SHA256(signature key, notification URL + raw body)), where the
// notification URL is exactly the one configured on the subscription.
package square

import (
	"encoding/base64"
	"net/url"
	"strings"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/internal/sig"
)

// Name is the registry key.
const Name = "square"

// SignatureHeader carries the signature.
const SignatureHeader = "X-Square-Hmacsha256-Signature"

// Connector is the Square connector. Create it with New.
type Connector struct {
	notificationURL string
}

// Option configures a Connector.
type Option func(*Connector)

// WithNotificationURL sets the subscription's notification URL, which Square
// signs. Set it whenever the service sits behind a proxy or the request URI
// may differ from what was registered; without it the connector uses
// Request.URI when that is an absolute URL.
func WithNotificationURL(u string) Option {
	return func(c *Connector) { c.notificationURL = u }
}

// New returns a Square connector.
func New(opts ...Option) *Connector {
	c := &Connector{}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Name implements connectors.Connector.
func (c *Connector) Name() string { return Name }

// Verify implements connectors.Connector. Square signs no timestamp, so
// replays can only be caught by de-duplicating on MerchantEventID.
func (c *Connector) Verify(req *connectors.Request, secrets [][]byte, _ time.Time) error {
	keys := sig.Usable(secrets)
	if len(keys) == 0 {
		return authErr("no webhook secret configured")
	}
	raw := strings.TrimSpace(req.Header(SignatureHeader))
	if raw == "" {
		return authErr("missing " + SignatureHeader + " header")
	}
	got, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return authErr(SignatureHeader + " header is not base64")
	}
	notificationURL, ok := c.urlFor(req)
	if !ok {
		return authErr("no notification URL configured and request URI is not absolute")
	}
	prefix := []byte(notificationURL)
	mac := func(key []byte) []byte { return sig.HMACSHA256(key, prefix, req.Body) }
	if !sig.Match(keys, [][]byte{got}, mac) {
		return authErr("signature matches no configured secret for URL " + notificationURL)
	}
	return nil
}

// urlFor returns the configured URL, else Request.URI when it is absolute
// (used verbatim: Square signs the URL string, not a normalized form).
func (c *Connector) urlFor(req *connectors.Request) (string, bool) {
	if c.notificationURL != "" {
		return c.notificationURL, true
	}
	u, err := url.Parse(req.URI)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return "", false
	}
	return req.URI, true
}

func authErr(reason string) error { return &connectors.AuthError{Connector: Name, Reason: reason} }

// Package adyen verifies and normalizes Adyen standard webhooks
// (NotificationRequest with NotificationRequestItems).
//
// Scheme (https://docs.adyen.com/development-resources/webhooks/secure-webhooks/verify-hmac-signatures):
// each item carries additionalData.hmacSignature =
// base64(HMAC-SHA256(hexdecode(key), pspReference:originalReference:
// merchantAccountCode:merchantReference:amount.value:amount.currency:
// eventCode:success)), missing fields as empty strings. The signature is
// inside the body, so the body must be parsed before it can be verified;
// every item of a batch must verify.
package adyen

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/internal/sig"
)

// Name is the registry key.
const Name = "adyen"

// Connector is the Adyen connector. It has no options; create it with New.
type Connector struct{}

// New returns an Adyen connector.
func New() *Connector { return &Connector{} }

// Name implements connectors.Connector.
func (c *Connector) Name() string { return Name }

// Verify implements connectors.Connector. Keys that are not hex are skipped;
// if none is usable the webhook is rejected.
func (c *Connector) Verify(req *connectors.Request, secrets [][]byte, _ time.Time) error {
	keys := hexKeys(secrets)
	if len(keys) == 0 {
		return authErr("no webhook secret configured (HMAC keys must be hex)")
	}
	items, err := decode(req.Body)
	if err != nil {
		return err
	}
	for i := range items {
		it := &items[i]
		b64 := it.additionalString("hmacSignature")
		if b64 == "" {
			return authErr("item " + strconv.Itoa(i) + " (" + it.PSPReference + "): missing additionalData.hmacSignature")
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return authErr("item " + strconv.Itoa(i) + " (" + it.PSPReference + "): hmacSignature is not base64")
		}
		payload := []byte(it.signingString())
		mac := func(key []byte) []byte { return sig.HMACSHA256(key, payload) }
		if !sig.Match(keys, [][]byte{got}, mac) {
			return authErr("item " + strconv.Itoa(i) + " (" + it.PSPReference + "): hmacSignature matches no configured key")
		}
	}
	return nil
}

// signingString is the colon-joined field list Adyen signs. Values are used
// exactly as they appear in the body (the amount's JSON number text).
func (it *item) signingString() string {
	return strings.Join([]string{
		it.PSPReference,
		it.OriginalReference,
		it.MerchantAccountCode,
		it.MerchantReference,
		it.Amount.Value.String(),
		it.Amount.Currency,
		it.EventCode,
		string(it.Success),
	}, ":")
}

func hexKeys(secrets [][]byte) [][]byte {
	var keys [][]byte
	for _, s := range sig.Usable(secrets) {
		if k, ok := hexKey(s); ok {
			keys = append(keys, k)
		}
	}
	return keys
}

func hexKey(secret []byte) ([]byte, bool) {
	k, err := hex.DecodeString(strings.TrimSpace(string(secret)))
	return k, err == nil && len(k) > 0
}

var _ connectors.SecretChecker = (*Connector)(nil)

// CheckSecret implements connectors.SecretChecker: Verify skips a key that is not hex.
func (c *Connector) CheckSecret(secret []byte) error {
	if _, ok := hexKey(secret); !ok {
		return errors.New("the Adyen HMAC key must be hex, as the Customer Area shows it")
	}
	return nil
}

func decode(body []byte) ([]item, error) {
	var n notification
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, parseErr(err)
	}
	if len(n.NotificationItems) == 0 {
		return nil, parseErr(errors.New("no notificationItems"))
	}
	items := make([]item, len(n.NotificationItems))
	for i, w := range n.NotificationItems {
		if w.Item == nil {
			return nil, parseErr(errors.New("notificationItems[" + strconv.Itoa(i) + "] has no NotificationRequestItem"))
		}
		items[i] = *w.Item
	}
	return items, nil
}

func authErr(reason string) error { return &connectors.AuthError{Connector: Name, Reason: reason} }

func parseErr(err error) error { return &connectors.ParseError{Connector: Name, Err: err} }

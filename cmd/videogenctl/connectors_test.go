package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// `kubectl videogen connectors` ("which payment connectors can verify
// webhooks", README) said adyen READY true, 1 signing secret, when the only Secret labelled
// adyen held a key that is not hex. Adyen's HMAC key is hex and the connector skips any other,
// so every Adyen delivery was answered 401 "no webhook secret configured (HMAC keys must be
// hex)" while the health check said all was well. A secret the connector cannot use is no
// signing secret: the row is not ready and its problem says why.
func TestConnectorsCountsOnlySecretsTheConnectorCanUse(t *testing.T) {
	_, ctx, c, path := asPlatformAdmin(t)
	secret := func(name, connector string, data map[string]string) {
		t.Helper()
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "videogen-system", Name: name,
			Labels: map[string]string{"videogen.dev/webhook-connector": connector}}, StringData: data}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// Adyen: a key copied with its dashes, as a password; Square: any text is a key.
	secret("adyen", "adyen", map[string]string{"secret": "not-a-hex-key"})
	secret("square", "square", map[string]string{"secret": "not-a-hex-key"})
	rows := func() map[string]connectorRow {
		t.Helper()
		var out bytes.Buffer
		if err := run(ctx, []string{"connectors", "-o", "json", "--kubeconfig", path}, &out); err != nil {
			t.Fatal(err)
		}
		var list []connectorRow
		if err := json.Unmarshal(out.Bytes(), &list); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		byName := map[string]connectorRow{}
		for _, r := range list {
			byName[r.Connector] = r
		}
		return byName
	}
	got := rows()
	if a := got["adyen"]; a.Ready || a.SigningSecrets != 0 || !strings.Contains(a.Problem, "hex") || !strings.Contains(a.Problem, "adyen") {
		t.Errorf("adyen with a key that is not hex: %+v, want not ready, 0 signing secrets, a problem saying the key must be hex", a)
	}
	if s := got["square"]; !s.Ready || s.SigningSecrets != 1 {
		t.Errorf("square with a text key: %+v, want ready with 1 signing secret", s)
	}

	// A hex key beside it, as during a fix: ready with the one usable secret.
	secret("adyen-fixed", "adyen", map[string]string{"secret": "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"})
	if a := rows()["adyen"]; !a.Ready || a.SigningSecrets != 1 {
		t.Errorf("adyen with a hex key beside the bad one: %+v, want ready with 1 signing secret", a)
	}
}

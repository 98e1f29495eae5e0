package connectorsecrets_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/videogen-dev/videogen-operator/apiserver/connectorsecrets"
)

func labelled(ns, name, connector, secret string) client.Object {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{connectorsecrets.LabelConnector: connector}},
		Data: map[string][]byte{connectorsecrets.KeySecret: []byte(secret)},
	}
}

// A Secret labelled with the connector's name in another case is that connector's, as
// videogenctl connectors reports it (and as connector names in webhook URLs are matched):
// it must not be listed as ready there and then answer every delivery with 401.
func TestSecretsMatchTheLabelIgnoringCase(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(
		labelled("pay", "adyen-webhook", "Adyen", "hmac-key"),
		labelled("pay", "stripe-webhook", "stripe", " whsec_1\n"),
		labelled("other", "adyen-elsewhere", "adyen", "not-this-namespace"),
	).Build()
	src := connectorsecrets.New(c, "pay")
	for connector, want := range map[string]string{"adyen": "hmac-key", "stripe": "whsec_1"} {
		got, err := src.Secrets(connector)
		if err != nil {
			t.Fatalf("Secrets(%q): %v", connector, err)
		}
		if len(got) != 1 || string(got[0]) != want {
			t.Errorf("Secrets(%q) = %q, want [%q]", connector, got, want)
		}
	}
	if got, err := src.Secrets("checkout"); err != nil || len(got) != 0 {
		t.Errorf("Secrets(checkout) = %q, %v; want none", got, err)
	}
}

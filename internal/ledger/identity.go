package ledger

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewIdentity names this process for status.authority: its host (the pod) and a random part,
// so that a restarted manager on the same pod is another authority.
func NewIdentity() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s_%s", host, uuid.NewUUID())
}

// SigningKeyField is the data key of the signing key in its Secret.
const SigningKeyField = "key"

// LoadOrCreateKey returns the ledger's signing key from the Secret namespace/name, making the
// Secret with a random key if there is none (the first manager to start wins; the others read
// its key).
func LoadOrCreateKey(ctx context.Context, c client.Client, namespace, name string) ([]byte, error) {
	for {
		s := &corev1.Secret{}
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s)
		if err == nil {
			if key := s.Data[SigningKeyField]; len(key) >= 32 {
				return key, nil
			}
			return nil, fmt.Errorf("secret %s/%s: %q must hold at least 32 bytes", namespace, name, SigningKeyField)
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading the ledger signing key %s/%s: %w", namespace, name, err)
		}
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
				Labels: map[string]string{"app.kubernetes.io/name": "videogen-operator", "app.kubernetes.io/component": "ledger"}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{SigningKeyField: key},
		}
		err = c.Create(ctx, s)
		if err == nil {
			return key, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating the ledger signing key %s/%s: %w", namespace, name, err)
		}
	}
}

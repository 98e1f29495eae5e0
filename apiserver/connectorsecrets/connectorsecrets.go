// Package connectorsecrets is an eventservice.SecretSource backed by Kubernetes Secrets, read
// through an informer cache, so a rotated webhook secret is used within seconds and without a
// restart.
//
// A Secret holds the webhook secrets of one connector when it is labelled
// videogen.dev/webhook-connector=<connector> (e.g. stripe; matched case-insensitively, as the
// connector names of the webhook URLs and of videogenctl connectors are) and lives in the watched
// namespace. Keys: "secret" (required) and "additional_secret" (optional, the other secret during
// a rotation). Values are trimmed of surrounding whitespace (a trailing newline from a file is
// common and never part of a secret). Every labelled Secret of a connector counts, so a rotation
// can also add a second Secret and later delete the first.
package connectorsecrets

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Label, keys and defaults of connector Secrets.
const (
	LabelConnector      = "videogen.dev/webhook-connector"
	KeySecret           = "secret"
	KeyAdditionalSecret = "additional_secret"
	// lookupTimeout bounds a read from a cache that is not synced yet; the request then fails
	// with 503 and the processor retries.
	lookupTimeout = 2 * time.Second
)

// Source yields a connector's webhook secrets from the Secrets a cache holds.
type Source struct {
	reader    client.Reader
	namespace string
}

// New returns a Source reading the labelled Secrets of namespace through reader, which should
// be a cache (see NewCache); a direct client works too, at one apiserver call per request.
func New(reader client.Reader, namespace string) *Source {
	return &Source{reader: reader, namespace: namespace}
}

// Secrets implements eventservice.SecretSource. Secrets are ordered by Secret name so that the
// result is stable; any of them verifies a delivery. The label's value is compared with
// connector ignoring case: a Secret labelled "Adyen" is adyen's, as videogenctl connectors
// reports it.
func (s *Source) Secrets(connector string) ([][]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	var list corev1.SecretList
	if err := s.reader.List(ctx, &list, client.InNamespace(s.namespace), client.HasLabels{LabelConnector}); err != nil {
		return nil, fmt.Errorf("listing Secrets labelled %s=%s in namespace %q: %w", LabelConnector, connector, s.namespace, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	var out [][]byte
	for _, secret := range list.Items {
		if !strings.EqualFold(secret.Labels[LabelConnector], connector) {
			continue
		}
		for _, key := range []string{KeySecret, KeyAdditionalSecret} {
			if v := strings.TrimSpace(string(secret.Data[key])); v != "" {
				out = append(out, []byte(v))
			}
		}
	}
	return out, nil
}

// NewCache returns a cache that watches only the labelled Secrets of namespace: other Secrets
// are neither listed nor held in memory. It needs get, list and watch on secrets in namespace.
// Start it (it is a manager.Runnable, or call Start in a goroutine) before the first request;
// WaitForCacheSync tells when it is ready.
func NewCache(cfg *rest.Config, namespace string) (cache.Cache, error) {
	selector, err := labels.Parse(LabelConnector)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return cache.New(cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject:          map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: selector}},
	})
}

// Start builds a cache for namespace, starts it until ctx ends, waits for it to sync and
// returns a Source on it: the one call a server needs.
func Start(ctx context.Context, cfg *rest.Config, namespace string) (*Source, error) {
	c, err := NewCache(cfg, namespace)
	if err != nil {
		return nil, err
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Start(ctx) }()
	// Informers start on first use; ask for Secrets now so the sync below covers them.
	if _, err := c.GetInformer(ctx, &corev1.Secret{}); err != nil {
		return nil, fmt.Errorf("watching connector Secrets in namespace %q: %w", namespace, err)
	}
	if !c.WaitForCacheSync(ctx) {
		select {
		case err := <-errc:
			return nil, fmt.Errorf("connector Secrets cache in namespace %q: %w", namespace, err)
		default:
			return nil, fmt.Errorf("connector Secrets cache in namespace %q did not sync", namespace)
		}
	}
	return New(c, namespace), nil
}

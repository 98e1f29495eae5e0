package apiserver

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/videogen-dev/videogen-operator/internal/accountns"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
)

// accountReader reads for p's account from the informer cache, and trusts what it finds in the
// account's namespace only if it was made for that namespace (accountns.MadeFor): a cache whose
// watch is behind may still hold the objects of a namespace of that name deleted since, another
// tenant's, which are not the caller's to see or use. An answer holding one is replaced by the
// kube-apiserver's (around the cache), taken as it is: a namespace is emptied before it goes,
// so the store holds no object of a deleted one. Objects of other namespaces, and cluster-scoped
// ones (official Templates), are no account's and are taken from the cache.
func (s *Server) accountReader(p apikeys.Principal) client.Reader {
	return accountReader{cache: s.cfg.Client, store: s.cfg.APIReader, account: p.Account, ns: p.Namespace()}
}

type accountReader struct {
	cache, store client.Reader
	account      string
	ns           *corev1.Namespace
}

func (a accountReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := a.cache.Get(ctx, key, obj, opts...); err != nil || a.trusted(obj) {
		return err
	}
	// Emptied first: a read decodes into obj, and would keep the cached object's map entries
	// (its labels, annotations) that the stored one lacks.
	reflect.ValueOf(obj).Elem().SetZero()
	return a.store.Get(ctx, key, obj, opts...)
}

// List lists around the cache, not just without the untrusted items: a cache that still holds a
// deleted namespace's objects is behind on the namespace of that name now too, and the store's
// list is whole, as a Get's answer is.
func (a accountReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := a.cache.List(ctx, list, opts...); err != nil {
		return err
	}
	trusted := true
	if err := meta.EachListItem(list, func(item runtime.Object) error {
		obj, err := meta.Accessor(item)
		trusted = trusted && err == nil && a.trusted(obj)
		return nil
	}); err != nil {
		return err
	}
	if trusted {
		return nil
	}
	reflect.ValueOf(list).Elem().SetZero()
	return a.store.List(ctx, list, opts...)
}

func (a accountReader) trusted(obj metav1.Object) bool {
	return obj.GetNamespace() != a.account || accountns.MadeFor(obj, a.ns)
}

// Package accountns ties an object kept outside an account's namespace (an API key, a webhook
// signing secret, both Secrets in the operator's namespace) to that namespace itself, by its
// UID, not its name: a namespace deleted and later made again under the name, for whoever, does
// not take what the first one had.
package accountns

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotation is the UID of the namespace an object was made for.
const Annotation = "videogen.dev/account-uid"

// Recorded says whether obj carries Annotation; objects made before it was written do not.
func Recorded(obj metav1.Object) bool {
	_, ok := obj.GetAnnotations()[Annotation]
	return ok
}

// MadeFor says whether obj was made for namespace ns: its Annotation is ns's UID, or, for an
// object without it, it is no older than ns (nothing is made for a namespace that does not exist
// yet). Objects without it are API keys and signing Secrets from before it was written (every
// one made since records it), and the account's own VideoTasks and ShortTemplates, which live in
// the namespace and record nothing (the REST apiserver asks this of its cached copies). Whole
// seconds (creationTimestamp's) are enough for them: the one mistake left is an object taken by
// a namespace re-created in the very second it was made, its earlier namespace deleted within
// that second, which takes longer (the namespace controller empties a namespace before it goes).
func MadeFor(obj metav1.Object, ns *corev1.Namespace) bool {
	if Recorded(obj) {
		return obj.GetAnnotations()[Annotation] == string(ns.UID)
	}
	created, nsCreated := obj.GetCreationTimestamp(), ns.GetCreationTimestamp()
	return !created.Before(&nsCreated)
}

// Record writes ns's UID on obj.
func Record(obj metav1.Object, ns *corev1.Namespace) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[Annotation] = string(ns.UID)
	obj.SetAnnotations(a)
}

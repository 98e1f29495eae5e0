// Package scheme builds the runtime.Scheme every binary and test of this project uses: the
// built-in Kubernetes types plus videogen.dev/v1alpha1.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// New returns a fresh scheme.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(videogenv1alpha1.AddToScheme(s))
	return s
}

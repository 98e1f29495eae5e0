package backends

import videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"

func capabilityOf(s string) videogenv1alpha1.Capability { return videogenv1alpha1.Capability(s) }

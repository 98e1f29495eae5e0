//go:build !linux

package harness

import "errors"

// PinControlPlane needs Linux's CPU affinity.
func PinControlPlane() error { return errors.New("pinning the control plane needs Linux") }

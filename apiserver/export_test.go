package apiserver

import "time"

// TaskName is taskName for the external tests: the VideoTask (and hold) name of a key.
var TaskName = taskName

// FieldLimits ties each length-limited request field to the CRD field that stores it.
var FieldLimits = fieldLimits

// IdempotencyKey is idempotencyKey for the external tests: the key of a request, or its 400.
var IdempotencyKey = idempotencyKey

// ShortenClusterTimeouts sets the bounds of the cluster calls that decide an answer (a hung
// kube-apiserver in a spec costs it this long); the returned func restores them.
func ShortenClusterTimeouts(d time.Duration) (restore func()) {
	read, write := clusterReadTimeout, clusterWriteTimeout
	clusterReadTimeout, clusterWriteTimeout = d, d
	return func() { clusterReadTimeout, clusterWriteTimeout = read, write }
}

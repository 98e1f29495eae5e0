// Package kubeerr tells apart refusals of the kube-apiserver that share one reason.
package kubeerr

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// RefusedByAdmission reports whether err, an Invalid (422) of the kube-apiserver, is an
// admission policy's refusal rather than a rule of the object's schema: a
// ValidatingAdmissionPolicy whose validation sets no reason denies with Invalid, the
// kube-apiserver's default, with causes that carry only its message, whereas every cause of a
// CRD's own validation (its schema and its CEL rules) has its field error type
// (FieldValueInvalid, FieldValueRequired, ...). Such a refusal names no field of the request:
// it is the namespace's, to be answered as a Forbidden is.
func RefusedByAdmission(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	causes := status.Status().Details.Causes
	for _, cause := range causes {
		if cause.Type != "" {
			return false
		}
	}
	return len(causes) > 0
}

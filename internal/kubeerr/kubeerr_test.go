package kubeerr_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/videogen-dev/videogen-operator/internal/kubeerr"
)

// policyDenial is the Status the kube-apiserver answers for a ValidatingAdmissionPolicy whose
// validation sets no reason: Invalid, its one cause the policy's message, of no field type.
func policyDenial(resource, name, message string) error {
	denial := apierrors.NewForbidden(schema.GroupResource{Group: "videogen.dev", Resource: resource}, name, errors.New(message))
	denial.ErrStatus.Reason = metav1.StatusReasonInvalid
	denial.ErrStatus.Code = http.StatusUnprocessableEntity
	denial.ErrStatus.Details.Causes = []metav1.StatusCause{{Message: message}}
	return denial
}

func TestRefusedByAdmissionTellsAPolicyFromTheSchema(t *testing.T) {
	policy := policyDenial("videotasks", "t", "ValidatingAdmissionPolicy 'no-tasks' with binding 'no-tasks' denied request: closed")
	schemaRule := apierrors.NewInvalid(schema.GroupKind{Group: "videogen.dev", Kind: "VideoTask"}, "t", field.ErrorList{
		field.Invalid(field.NewPath("spec", "webhookURL"), "x", "should match '^https?://'")})
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a policy's Invalid", policy, true},
		{"a policy's Invalid, wrapped", fmt.Errorf("creating task: %w", policy), true},
		{"the schema's Invalid", schemaRule, false},
		{"a Forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "videotasks"}, "t", errors.New("quota")), false},
		{"an Invalid without causes", apierrors.NewInvalid(schema.GroupKind{Kind: "VideoTask"}, "t", nil), false},
		{"no API error", errors.New("connection reset"), false},
	} {
		if got := kubeerr.RefusedByAdmission(tc.err); got != tc.want {
			t.Errorf("%s: RefusedByAdmission = %v, want %v", tc.name, got, tc.want)
		}
	}
}

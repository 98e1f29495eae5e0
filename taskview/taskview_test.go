package taskview

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

func TestCostIsTheAdmittedPriceUntilTheControllerPricesTheTask(t *testing.T) {
	task := func(admitted string, phase videogenv1alpha1.TaskPhase, cost *int64) *videogenv1alpha1.VideoTask {
		vt := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Name: "vt-x"}}
		if admitted != "" {
			vt.Annotations = map[string]string{videogenv1alpha1.AnnotationAdmittedPrice: admitted}
		}
		vt.Status.Phase, vt.Status.Cost = phase, cost
		return vt
	}
	cases := map[string]struct {
		task  *videogenv1alpha1.VideoTask
		price *int64
		want  *int64
	}{
		"just created: the admitted price":           {task("30", "", nil), nil, ptr.To[int64](30)},
		"just created, price given":                  {task("", "", nil), ptr.To[int64](12), ptr.To[int64](12)},
		"accepted: status.cost":                      {task("30", videogenv1alpha1.TaskQueued, ptr.To[int64](25)), nil, ptr.To[int64](25)},
		"created with kubectl, not yet priced":       {task("", "", nil), nil, nil},
		"unreadable annotation":                      {task("thirty", "", nil), nil, nil},
		"ended before it was priced: never held any": {task("30", videogenv1alpha1.TaskFailed, nil), nil, nil},
	}
	for name, c := range cases {
		got := Of(c.task, c.price).Cost
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%s: cost = %v, want %v", name, ptr.Deref(got, -1), ptr.Deref(c.want, -1))
		}
	}
}

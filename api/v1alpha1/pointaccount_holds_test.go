package v1alpha1

import (
	"reflect"
	"testing"
)

func TestSetHoldsGroupsAndSortsSoTheSameHoldsSerializeTheSameWay(t *testing.T) {
	holds := map[string]int64{"vt-c": 10, "vt-a": 10, "vt-b": 25, "vt-d": 0}
	var st PointAccountStatus
	st.SetHolds(holds)
	want := []HoldGroup{{Amount: 0, Tasks: []string{"vt-d"}}, {Amount: 10, Tasks: []string{"vt-a", "vt-c"}}, {Amount: 25, Tasks: []string{"vt-b"}}}
	if !reflect.DeepEqual(st.Holds, want) {
		t.Fatalf("holds = %+v, want %+v", st.Holds, want)
	}
	if got := st.HoldsByTask(); !reflect.DeepEqual(got, holds) {
		t.Fatalf("HoldsByTask = %v, want %v", got, holds)
	}
	if st.HoldCount() != 4 {
		t.Fatalf("HoldCount = %d", st.HoldCount())
	}
	st.SetHolds(nil)
	if st.Holds != nil || st.HoldCount() != 0 {
		t.Fatalf("no holds = %+v", st.Holds)
	}
}

func TestHasHold(t *testing.T) {
	var s PointAccountStatus
	s.SetHolds(map[string]int64{"vt-a": 10, "vt-b": 10, "vt-c": 25})
	for task, want := range map[string]bool{"vt-a": true, "vt-b": true, "vt-c": true, "vt-d": false, "": false} {
		if got := s.HasHold(task); got != want {
			t.Errorf("HasHold(%q) = %v, want %v", task, got, want)
		}
	}
}

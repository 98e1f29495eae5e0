package v1alpha1

import (
	"maps"
	"slices"
)

// HoldsByTask returns the holds as a map from task name to points held.
func (s PointAccountStatus) HoldsByTask() map[string]int64 {
	m := make(map[string]int64, s.HoldCount())
	for _, g := range s.Holds {
		for _, t := range g.Tasks {
			m[t] = g.Amount
		}
	}
	return m
}

// HasHold reports whether task holds points, without building the map of HoldsByTask.
func (s PointAccountStatus) HasHold(task string) bool {
	_, ok := s.HoldOf(task)
	return ok
}

// HoldOf returns the points task holds, without building the map of HoldsByTask.
func (s PointAccountStatus) HoldOf(task string) (int64, bool) {
	for _, g := range s.Holds {
		if slices.Contains(g.Tasks, task) {
			return g.Amount, true
		}
	}
	return 0, false
}

// SetHolds replaces the holds with m, grouped by amount, groups and names sorted, so that the
// same holds always serialize the same way.
func (s *PointAccountStatus) SetHolds(m map[string]int64) {
	byAmount := map[int64][]string{}
	for t, a := range m {
		byAmount[a] = append(byAmount[a], t)
	}
	s.Holds = nil
	for _, a := range slices.Sorted(maps.Keys(byAmount)) {
		tasks := byAmount[a]
		slices.Sort(tasks)
		s.Holds = append(s.Holds, HoldGroup{Amount: a, Tasks: tasks})
	}
}

// HoldCount is the number of unsettled tasks holding points.
func (s PointAccountStatus) HoldCount() int {
	n := 0
	for _, g := range s.Holds {
		n += len(g.Tasks)
	}
	return n
}

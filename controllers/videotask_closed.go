package controllers

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// closable reports whether nothing is left to do for a task but its deletion at the TTL: it is
// terminal, its points are settled (or were never frozen), no stage of it runs (one does only
// in a status ended by hand, until reconcileFinished stops it; the CRD refuses a closed task
// with a running stage), and no completion webhook is due. Status writes that make this true
// set status.closed in the same write.
func closable(t *videogenv1alpha1.VideoTask) bool {
	return t.Status.Phase.Terminal() && t.Status.Charge != videogenv1alpha1.ChargeFrozen &&
		t.Status.CompletedAt != nil && !webhookDue(t) &&
		!slices.ContainsFunc(t.Status.Stages, func(st videogenv1alpha1.StageStatus) bool { return st.State == videogenv1alpha1.StageRunning })
}

// CacheByObject is the manager's cache configuration for the controllers: VideoTasks are
// watched only while they are not closed. Finished tasks would otherwise fill the cache and
// make every start list and decode all of them (10,000 finished tasks took about 3 s before
// any reconcile could start); the finished-task collector finds them with a field selector.
// Merge it with other ByObject entries (the Job backend's) with MergeCacheByObject.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&videogenv1alpha1.VideoTask{}: {Field: fields.OneTermNotEqualSelector(videogenv1alpha1.FieldStatusClosed, "true")},
	}
}

// MergeCacheByObject returns the entries of all maps in one; the maps must name different types.
func MergeCacheByObject(byObject ...map[client.Object]cache.ByObject) map[client.Object]cache.ByObject {
	out := map[client.Object]cache.ByObject{}
	for _, m := range byObject {
		maps.Copy(out, m)
	}
	return out
}

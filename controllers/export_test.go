package controllers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SweepFinishedTasks runs one sweep of the finished-task collector, listing page tasks at a
// time, and returns how many it deleted and how long until the next TTL runs out.
func SweepFinishedTasks(ctx context.Context, c client.Client, ttl time.Duration, page int64) (int, time.Duration, error) {
	col := &finishedTaskCollector{client: c, reader: c, ttl: ttl, clock: clock.RealClock{}, page: page}
	return col.sweep(ctx)
}

// InterruptCall cuts short the backend call a reconcile of the task is making, as the watch
// event of a cancel request does.
func (r *VideoTaskReconciler) InterruptCall(uid types.UID) { r.interruptCall(uid) }

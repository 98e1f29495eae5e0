package controllers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// finishedTaskCollector deletes closed VideoTasks once the finished-task TTL has passed since
// they completed. The manager's cache holds only open tasks, so the collector pages through the
// closed ones with a field selector instead: a list of them now and then costs less than
// keeping every finished task in memory and listing all of them at each start.
type finishedTaskCollector struct {
	client client.Client // deletes
	reader client.Reader // lists, uncached
	ttl    time.Duration
	clock  clock.WithTicker
	page   int64 // tasks per list response (0: collectorPage)
}

// collectorPage bounds one list response, and so the memory of a sweep.
const collectorPage = 500

// collectorDeletes bounds the deletes a sweep has in flight.
const collectorDeletes = 8

// NeedLeaderElection: only the elected manager deletes.
func (c *finishedTaskCollector) NeedLeaderElection() bool { return true }

// Start sweeps until ctx ends: at most every collectEvery, sooner when the next TTL runs out
// before that.
func (c *finishedTaskCollector) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("finished-task-collector")
	every := collectEvery(c.ttl)
	wait := every
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(wait):
		}
		deleted, next, err := c.sweep(ctx)
		if err != nil && ctx.Err() == nil {
			log.Error(err, "sweeping finished tasks", "deleted", deleted)
		} else if deleted > 0 {
			log.Info("deleted finished tasks after their TTL", "deleted", deleted, "ttl", c.ttl)
		}
		wait = every
		if next > 0 && next < wait {
			wait = max(next, time.Second)
		}
	}
}

// collectEvery is the longest pause between sweeps: a tenth of the TTL, between 1 s and 10 min.
func collectEvery(ttl time.Duration) time.Duration {
	return min(max(ttl/10, time.Second), 10*time.Minute)
}

// sweep deletes every closed task past its TTL and returns how many it deleted and how long
// until the next one's TTL runs out (0: none left).
func (c *finishedTaskCollector) sweep(ctx context.Context) (int, time.Duration, error) {
	now := c.clock.Now()
	var deleted int
	var next time.Duration
	page := c.page
	if page <= 0 {
		page = collectorPage
	}
	opts := []client.ListOption{client.MatchingFields{videogenv1alpha1.FieldStatusClosed: "true"}, client.Limit(page)}
	var failed error // the first delete that failed, of any page
	var failedOnce sync.Once
	for cont := ""; ; {
		var page videogenv1alpha1.VideoTaskList
		if err := c.reader.List(ctx, &page, append(opts, client.Continue(cont))...); err != nil {
			return deleted, next, err
		}
		// Deletes of one page run side by side: a sweep after a long pause may find thousands.
		var n atomic.Int64
		var g errgroup.Group
		g.SetLimit(collectorDeletes)
		for i := range page.Items {
			t := &page.Items[i]
			if t.Status.CompletedAt == nil || !t.DeletionTimestamp.IsZero() {
				continue
			}
			if left := t.Status.CompletedAt.Add(c.ttl).Sub(now); left > 0 {
				if next == 0 || left < next {
					next = left
				}
				continue
			}
			g.Go(func() error {
				// Preconditions: delete exactly the object whose TTL was checked.
				uid, rv := t.UID, t.ResourceVersion
				err := c.client.Delete(ctx, t, client.Preconditions{UID: &uid, ResourceVersion: &rv})
				switch {
				case err == nil:
					n.Add(1)
				case apierrors.IsNotFound(err), apierrors.IsConflict(err):
					// gone already, or changed since the list: the next sweep looks again
				default:
					// Reported at the end, not returned: one task whose delete is refused for
					// good (an admission policy of the cluster's) would otherwise stop every
					// sweep at its page, and no task listed after it would ever go.
					failedOnce.Do(func() { failed = fmt.Errorf("deleting finished task %s/%s: %w", t.Namespace, t.Name, err) })
				}
				return nil
			})
		}
		_ = g.Wait() // every delete returns nil: its failure is in failed
		deleted += int(n.Load())
		if err := ctx.Err(); err != nil {
			return deleted, next, err
		}
		if cont = page.Continue; cont == "" {
			return deleted, next, failed
		}
	}
}

// Package watchlag makes informers lag behind the kube-apiserver by a fixed delay, for the chaos
// test's mode in which the manager's cache lags (cmd/manager --debug-watch-delay): every watch
// event reaches the informer's store and handlers that much later than it was sent, as from a
// slow or congested watch, while reads around the cache and writes are not delayed.
package watchlag

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// NewInformer is a cache.Options.NewInformer whose informers see every watch event delay late.
func NewInformer(delay time.Duration) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
		return toolscache.NewSharedIndexInformer(&lagging{inner: toolscache.ToListerWatcherWithContext(lw), delay: delay}, obj, resync, idx)
	}
}

// lagging delays the events of its watches; lists are not delayed.
type lagging struct {
	inner toolscache.ListerWatcherWithContext
	delay time.Duration
}

func (l *lagging) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.inner.ListWithContext(context.Background(), opts)
}

func (l *lagging) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return l.inner.ListWithContext(ctx, opts)
}

func (l *lagging) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

func (l *lagging) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := l.inner.WatchWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	return delayed(w, l.delay), nil
}

// delayedWatch passes on the events of inner, each delay after it arrived, in order.
type delayedWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
}

func delayed(inner watch.Interface, delay time.Duration) watch.Interface {
	d := &delayedWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	type timed struct {
		ev watch.Event
		at time.Time
	}
	queue := make(chan timed, 4096)
	go func() { // stamp each event as it arrives
		defer close(queue)
		for ev := range inner.ResultChan() {
			select {
			case queue <- timed{ev, time.Now()}:
			case <-d.stop:
				return
			}
		}
	}()
	go func() { // and hand it on delay later
		defer close(d.out)
		for t := range queue {
			select {
			case <-time.After(time.Until(t.at.Add(delay))):
			case <-d.stop:
				return
			}
			select {
			case d.out <- t.ev:
			case <-d.stop:
				return
			}
		}
	}()
	return d
}

func (d *delayedWatch) ResultChan() <-chan watch.Event { return d.out }

func (d *delayedWatch) Stop() {
	select {
	case <-d.stop:
	default:
		close(d.stop)
	}
	d.inner.Stop()
}

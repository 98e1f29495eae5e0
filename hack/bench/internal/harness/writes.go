package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/videogen-dev/videogen-operator/internal/ledger"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// WriteKey says who wrote what, how.
type WriteKey struct {
	Who, Kind, Verb string
}

// Counter counts the write calls that pass through the clients it wraps: every attempt,
// successful or not, because every attempt costs the kube-apiserver and etcd a request.
type Counter struct {
	mu        sync.Mutex
	attempts  map[WriteKey]int64
	conflicts map[WriteKey]int64
	events    map[string]int64
	// OnWrite, if set, is called after each successful write (for timing milestones).
	OnWrite func(who, verb string, obj client.Object)
}

// NewCounter returns an empty Counter.
func NewCounter() *Counter {
	return &Counter{attempts: map[WriteKey]int64{}, conflicts: map[WriteKey]int64{}, events: map[string]int64{}}
}

// Reset forgets every count so far.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attempts, c.conflicts, c.events = map[WriteKey]int64{}, map[WriteKey]int64{}, map[string]int64{}
}

// Snapshot returns a copy of the counts.
func (c *Counter) Snapshot() (attempts, conflicts map[WriteKey]int64, events map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp := func(m map[WriteKey]int64) map[WriteKey]int64 {
		out := make(map[WriteKey]int64, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	ev := make(map[string]int64, len(c.events))
	for k, v := range c.events {
		ev[k] = v
	}
	return cp(c.attempts), cp(c.conflicts), ev
}

// Total is the number of write attempts matching keep.
func (c *Counter) Total(keep func(WriteKey) bool) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for k, v := range c.attempts {
		if keep == nil || keep(k) {
			n += v
		}
	}
	return n
}

func (c *Counter) record(who, verb string, cl client.Client, obj client.Object, err error) {
	kind := fmt.Sprintf("%T", obj)
	if gvk, gerr := cl.GroupVersionKindFor(obj); gerr == nil {
		kind = gvk.Kind
	}
	k := WriteKey{Who: who, Kind: kind, Verb: verb}
	c.mu.Lock()
	c.attempts[k]++
	if apierrors.IsConflict(err) {
		c.conflicts[k]++
	}
	c.mu.Unlock()
	if err == nil && c.OnWrite != nil {
		c.OnWrite(who, verb, obj)
	}
}

// withWatch adapts a client.Client to the interceptor's client.WithWatch; nothing here watches.
type withWatch struct{ client.Client }

func (withWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("harness: watch is not supported through a counting client")
}

// Wrap returns cl with its writes counted under who.
func (c *Counter) Wrap(who string, cl client.Client) client.Client {
	return interceptor.NewClient(withWatch{cl}, interceptor.Funcs{
		Create: func(ctx context.Context, w client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			err := w.Create(ctx, obj, opts...)
			c.record(who, "create", w, obj, err)
			return err
		},
		Update: func(ctx context.Context, w client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			err := w.Update(ctx, obj, opts...)
			c.record(who, "update", w, obj, err)
			return err
		},
		Patch: func(ctx context.Context, w client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			err := w.Patch(ctx, obj, p, opts...)
			c.record(who, "patch", w, obj, err)
			return err
		},
		Delete: func(ctx context.Context, w client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			err := w.Delete(ctx, obj, opts...)
			c.record(who, "delete", w, obj, err)
			return err
		},
		DeleteAllOf: func(ctx context.Context, w client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			err := w.DeleteAllOf(ctx, obj, opts...)
			c.record(who, "deleteallof", w, obj, err)
			return err
		},
		SubResourceUpdate: func(ctx context.Context, w client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			err := w.SubResource(sub).Update(ctx, obj, opts...)
			c.record(who, sub+" update", w, obj, err)
			return err
		},
		SubResourcePatch: func(ctx context.Context, w client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			err := w.SubResource(sub).Patch(ctx, obj, p, opts...)
			c.record(who, sub+" patch", w, obj, err)
			return err
		},
	})
}

// Manager hands every caller of GetClient its own counting client, labelled with the
// controller that asked (read from the caller's source line, see labelFor), and counts the
// events each recorder emits. Pass it to controllers.Setup in place of the manager.
type Manager struct {
	ctrl.Manager
	Counter *Counter
	// Ledger reaches the manager's ledger, served on loopback.
	Ledger *ledger.Client
	mu     sync.Mutex
	Labels []string // in the order GetClient was called, for the report
}

// GetClient implements ctrl.Manager.
func (m *Manager) GetClient() client.Client {
	label := "manager"
	if _, file, line, ok := runtime.Caller(1); ok {
		label = labelFor(file, line)
	}
	m.mu.Lock()
	m.Labels = append(m.Labels, label)
	m.mu.Unlock()
	return m.Counter.Wrap(label, m.Manager.GetClient())
}

// GetEventRecorder implements ctrl.Manager; events are counted by recorder name.
func (m *Manager) GetEventRecorder(name string) recorder.EventRecorder {
	return &countingRecorder{EventRecorder: m.Manager.GetEventRecorder(name), name: name, c: m.Counter}
}

type countingRecorder struct {
	recorder.EventRecorder
	name string
	c    *Counter
}

func (r *countingRecorder) Eventf(regarding, related k8sruntime.Object, eventtype, reason, action, note string, args ...any) {
	r.c.mu.Lock()
	r.c.events[r.name]++
	r.c.mu.Unlock()
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

func (r *countingRecorder) AnnotatedEventf(regarding, related k8sruntime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	r.c.mu.Lock()
	r.c.events[r.name]++
	r.c.mu.Unlock()
	r.EventRecorder.AnnotatedEventf(regarding, related, annotations, eventtype, reason, action, note, args...)
}

var setupEntry = regexp.MustCompile(`\{"([^"]+)",\s*&`)

// labelFor names the client a line of controllers/setup.go asks for: the controller entry
// ({"Name", &…Reconciler{) the line belongs to, or "ledger" for the shared Ledger's writer.
func labelFor(file string, line int) string {
	fallback := fmt.Sprintf("%s:%d", file[strings.LastIndex(file, "/")+1:], line)
	f, err := os.Open(file)
	if err != nil {
		return fallback
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) == line {
			break
		}
	}
	if len(lines) < line {
		return fallback
	}
	if strings.Contains(lines[line-1], "ledger.New(") {
		return "ledger"
	}
	for i := line - 1; i >= 0 && i >= line-8; i-- {
		if m := setupEntry.FindStringSubmatch(lines[i]); m != nil {
			return m[1]
		}
	}
	return fallback
}

// SortedKeys returns the keys of m in a stable order.
func SortedKeys(m map[WriteKey]int64) []WriteKey {
	keys := make([]WriteKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b WriteKey) int {
		return strings.Compare(a.Who+"\x00"+a.Kind+"\x00"+a.Verb, b.Who+"\x00"+b.Kind+"\x00"+b.Verb)
	})
	return keys
}

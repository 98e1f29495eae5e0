// Command webhooks measures completion webhook deliveries: the controllers run in-process
// (controllers.Setup, manager defaults, the Sender allowed into loopback) with a backend that
// completes every stage at once; tasks with a webhook_url pointing at a local receiver are
// created directly (not through the REST API). It reports deliveries per second and the time
// from a task's terminal status write to the first delivery of its webhook.
//
//	go run ./hack/bench/webhooks [-tasks 300 -accounts 4 -c 16]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/hack/bench/internal/harness"
)

func main() {
	tasks := flag.Int("tasks", 300, "tasks, each with a completion webhook")
	accounts := flag.Int("accounts", 4, "accounts the tasks are spread over")
	conc := flag.Int("c", 16, "create concurrency")
	limit := flag.Duration("timeout", 6*time.Minute, "stop after this long, whatever happens")
	flag.Parse()
	ctx, cancel := harness.Bounded(*limit)
	defer cancel()
	if err := run(ctx, *tasks, *accounts, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "webhooks:", err)
		os.Exit(1)
	}
}

type times struct {
	mu         sync.Mutex
	terminal   map[string]time.Time // task name → terminal status written
	completed  map[string]time.Time // task name → status.completedAt (1 s resolution)
	created    map[string]time.Time // task name → its create returned
	delivered  map[string]time.Time // webhook-id → first delivery received
	uid        map[string]string    // webhook-id → task name
	deliveries int                  // every delivery received, retries included
}

// bench is one measurement: the control plane, the receiver and what they recorded.
type bench struct {
	nTasks, nAccounts, conc int
	env                     *harness.Env
	accts                   []harness.Account
	url                     string // the receiver's webhook URL
	counter                 *harness.Counter
	t                       *times
}

// run reads as the bench's steps: start the control plane and the receiver, start the
// controllers, create the tasks, wait for every webhook, report.
func run(ctx context.Context, nTasks, nAccounts, conc int) error {
	b := &bench{nTasks: nTasks, nAccounts: nAccounts, conc: conc, t: &times{
		terminal: map[string]time.Time{}, completed: map[string]time.Time{}, created: map[string]time.Time{},
		delivered: map[string]time.Time{}, uid: map[string]string{},
	}}
	fmt.Fprintln(os.Stderr, "starting the control plane…")
	env, err := harness.Start(ctx)
	if err != nil {
		return err
	}
	defer env.Stop()
	b.env = env
	ctx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	if b.accts, err = env.CreateAccounts(ctx, "acct", nAccounts, 1<<40, false); err != nil {
		return err
	}
	stopReceiver, err := b.startReceiver()
	if err != nil {
		return err
	}
	defer stopReceiver()
	if err := b.startControllers(ctx); err != nil {
		return err
	}
	if err := b.createTasks(ctx); err != nil {
		return err
	}
	if err := b.waitForDeliveries(ctx, 4*time.Minute); err != nil {
		return err
	}
	quietFor(b.counter, 2*time.Second, 30*time.Second)
	b.report()
	return nil
}

// startReceiver serves the webhook URL on loopback, recording each id's first delivery.
func (b *bench) startReceiver() (stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	receiver := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get("webhook-id")
		now := time.Now()
		b.t.mu.Lock()
		b.t.deliveries++
		if _, seen := b.t.delivered[id]; !seen && id != "" {
			b.t.delivered[id] = now
		}
		b.t.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = receiver.Serve(ln) }()
	b.url = "http://" + ln.Addr().String() + "/hook"
	return func() { _ = receiver.Close() }, nil
}

// startControllers runs the manager's controllers with an instant backend, noting the moment
// each task's terminal status write returns.
func (b *bench) startControllers(ctx context.Context) error {
	b.counter = harness.NewCounter()
	b.counter.OnWrite = func(_, verb string, obj client.Object) {
		task, ok := obj.(*videogenv1alpha1.VideoTask)
		if !ok || verb != "status update" || !task.Status.Phase.Terminal() {
			return
		}
		b.t.mu.Lock()
		defer b.t.mu.Unlock()
		if _, seen := b.t.terminal[task.Name]; !seen {
			b.t.terminal[task.Name] = time.Now()
			if task.Status.CompletedAt != nil {
				b.t.completed[task.Name] = task.Status.CompletedAt.Time
			}
		}
	}
	if _, err := b.env.StartControllers(ctx, b.counter, harness.ControllerOptions(harness.InstantBackend{})); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	b.counter.Reset()
	return nil
}

// createTasks creates the tasks directly, each with the receiver's URL as its webhook.
func (b *bench) createTasks(ctx context.Context) error {
	fmt.Fprintf(os.Stderr, "creating %d tasks with a webhook at c=%d…\n", b.nTasks, b.conc)
	create := harness.Run(ctx, b.nTasks, b.conc, func(ctx context.Context, i int) error {
		task := harness.Task(b.accts[i%len(b.accts)].Namespace, b.url)
		if err := b.env.Client.Create(ctx, task); err != nil {
			return err
		}
		b.t.mu.Lock()
		b.t.uid["msg_"+string(task.UID)] = task.Name
		b.t.created[task.Name] = time.Now()
		b.t.mu.Unlock()
		return nil
	})
	return create.Check("creates")
}

// waitForDeliveries returns once every task's webhook arrived at least once.
func (b *bench) waitForDeliveries(ctx context.Context, limit time.Duration) error {
	for end := time.Now().Add(limit); ; time.Sleep(50 * time.Millisecond) {
		b.t.mu.Lock()
		n := len(b.t.delivered)
		b.t.mu.Unlock()
		if n >= b.nTasks {
			return nil
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return fmt.Errorf("only %d of %d webhooks delivered within %s", n, b.nTasks, limit)
		}
	}
}

// latencies are the sorted delays of the first deliveries, and the span they cover.
type latencies struct {
	fromTerminal, fromCompleted, fromCreated []time.Duration
	firstCreate, firstTerminal               time.Time
	firstDelivery, lastDelivery              time.Time
}

func (b *bench) latencies() latencies {
	b.t.mu.Lock()
	defer b.t.mu.Unlock()
	var l latencies
	earliest := func(t *time.Time, at time.Time) {
		if t.IsZero() || at.Before(*t) {
			*t = at
		}
	}
	for id, at := range b.t.delivered {
		name, ok := b.t.uid[id]
		if !ok {
			continue
		}
		term := b.t.terminal[name]
		l.fromTerminal = append(l.fromTerminal, at.Sub(term))
		l.fromCompleted = append(l.fromCompleted, at.Sub(b.t.completed[name]))
		l.fromCreated = append(l.fromCreated, at.Sub(b.t.created[name]))
		earliest(&l.firstCreate, b.t.created[name])
		earliest(&l.firstTerminal, term)
		earliest(&l.firstDelivery, at)
		if at.After(l.lastDelivery) {
			l.lastDelivery = at
		}
	}
	slices.Sort(l.fromTerminal)
	slices.Sort(l.fromCompleted)
	slices.Sort(l.fromCreated)
	return l
}

func (b *bench) report() {
	l := b.latencies()
	b.t.mu.Lock()
	total := b.t.deliveries
	b.t.mu.Unlock()
	n := float64(len(l.fromTerminal))
	fmt.Println("### Completion webhooks: deliveries to a local receiver")
	fmt.Println()
	fmt.Println("Machine:", harness.Machine())
	fmt.Println()
	fmt.Printf("%d tasks over %d accounts created directly at c=%d, each with `spec.webhookURL` on loopback; manager defaults (webhook controller: %d concurrent deliveries).\n\n", b.nTasks, b.nAccounts, b.conc, controllers.DefaultOptions().Webhooks.Concurrency)
	fmt.Println("| deliveries/s (first → last delivery) | deliveries/s (first terminal → last delivery) | first create → last delivery | create → first delivery p50 | p99 | terminal → first delivery p50 | p99 | `completedAt` → first delivery p50 | p99 | deliveries received |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	fmt.Printf("| %.0f | %.0f | %s | %s | %s | %s | %s | %s | %s | %d |\n\n", n/l.lastDelivery.Sub(l.firstDelivery).Seconds(), n/l.lastDelivery.Sub(l.firstTerminal).Seconds(),
		harness.Ms(l.lastDelivery.Sub(l.firstCreate)), harness.Ms(harness.Quantile(l.fromCreated, 0.5)), harness.Ms(harness.Quantile(l.fromCreated, 0.99)),
		harness.Ms(harness.Quantile(l.fromTerminal, 0.5)), harness.Ms(harness.Quantile(l.fromTerminal, 0.99)),
		harness.Ms(harness.Quantile(l.fromCompleted, 0.5)), harness.Ms(harness.Quantile(l.fromCompleted, 0.99)), total)
	fmt.Println("\"Terminal\" is the moment the VideoTask controller's write of the terminal phase returned (measured by the client interceptor); `status.completedAt` has one-second resolution, so the second pair is only a cross-check. A webhook is due once the terminal write, which carries the charge decision, has landed.")
	fmt.Println()
	harness.PrintWrites(os.Stdout, b.counter, b.nTasks)
}

func quietFor(c *harness.Counter, idle, max time.Duration) {
	end := time.Now().Add(max)
	last, lastChange := c.Total(nil), time.Now()
	for time.Now().Before(end) {
		time.Sleep(200 * time.Millisecond)
		if n := c.Total(nil); n != last {
			last, lastChange = n, time.Now()
		} else if time.Since(lastChange) >= idle {
			return
		}
	}
}

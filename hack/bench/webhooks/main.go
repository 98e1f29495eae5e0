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
	mu        sync.Mutex
	terminal  map[string]time.Time // task name → terminal status written
	completed map[string]time.Time // task name → status.completedAt (1 s resolution)
	created   map[string]time.Time // task name → its create returned
	delivered map[string]time.Time // webhook-id → first delivery received
	uid       map[string]string    // webhook-id → task name
}

func run(ctx context.Context, nTasks, nAccounts, conc int) error {
	fmt.Fprintln(os.Stderr, "starting the control plane…")
	env, err := harness.Start(ctx)
	if err != nil {
		return err
	}
	defer env.Stop()
	ctx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	accts, err := env.CreateAccounts(ctx, "acct", nAccounts, 1<<40, false)
	if err != nil {
		return err
	}

	t := &times{terminal: map[string]time.Time{}, completed: map[string]time.Time{}, created: map[string]time.Time{}, delivered: map[string]time.Time{}, uid: map[string]string{}}
	var deliveries int
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	receiver := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get("webhook-id")
		now := time.Now()
		t.mu.Lock()
		deliveries++
		if _, seen := t.delivered[id]; !seen && id != "" {
			t.delivered[id] = now
		}
		t.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = receiver.Serve(ln) }()
	defer receiver.Close()
	url := "http://" + ln.Addr().String() + "/hook"

	counter := harness.NewCounter()
	counter.OnWrite = func(_, verb string, obj client.Object) {
		task, ok := obj.(*videogenv1alpha1.VideoTask)
		if !ok || verb != "status update" || !task.Status.Phase.Terminal() {
			return
		}
		t.mu.Lock()
		if _, seen := t.terminal[task.Name]; !seen {
			t.terminal[task.Name] = time.Now()
			if task.Status.CompletedAt != nil {
				t.completed[task.Name] = task.Status.CompletedAt.Time
			}
		}
		t.mu.Unlock()
	}
	if _, err := env.StartControllers(ctx, counter, harness.ControllerOptions(harness.InstantBackend{})); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	counter.Reset()

	fmt.Fprintf(os.Stderr, "creating %d tasks with a webhook at c=%d…\n", nTasks, conc)
	create := harness.Run(ctx, nTasks, conc, func(ctx context.Context, i int) error {
		task := harness.Task(accts[i%len(accts)].Namespace, url)
		if err := env.Client.Create(ctx, task); err != nil {
			return err
		}
		t.mu.Lock()
		t.uid["msg_"+string(task.UID)] = task.Name
		t.created[task.Name] = time.Now()
		t.mu.Unlock()
		return nil
	})
	if err := create.Check("creates"); err != nil {
		return err
	}
	for end := time.Now().Add(4 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		t.mu.Lock()
		n := len(t.delivered)
		t.mu.Unlock()
		if n >= nTasks {
			break
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return fmt.Errorf("only %d of %d webhooks delivered within 4 minutes", n, nTasks)
		}
	}

	t.mu.Lock()
	var firstTerm, firstDel, lastDel, firstCreate time.Time
	var lat, latCompleted, latCreated []time.Duration
	for id, at := range t.delivered {
		name, ok := t.uid[id]
		if !ok {
			continue
		}
		term := t.terminal[name]
		lat = append(lat, at.Sub(term))
		latCompleted = append(latCompleted, at.Sub(t.completed[name]))
		latCreated = append(latCreated, at.Sub(t.created[name]))
		if c := t.created[name]; firstCreate.IsZero() || c.Before(firstCreate) {
			firstCreate = c
		}
		if firstTerm.IsZero() || term.Before(firstTerm) {
			firstTerm = term
		}
		if firstDel.IsZero() || at.Before(firstDel) {
			firstDel = at
		}
		if at.After(lastDel) {
			lastDel = at
		}
	}
	total := deliveries
	t.mu.Unlock()
	slices.Sort(lat)
	slices.Sort(latCompleted)
	slices.Sort(latCreated)
	quietFor(counter, 2*time.Second, 30*time.Second)

	fmt.Println("### Completion webhooks: deliveries to a local receiver")
	fmt.Println()
	fmt.Println("Machine:", harness.Machine())
	fmt.Println()
	fmt.Printf("%d tasks over %d accounts created directly at c=%d, each with `spec.webhookURL` on loopback; manager defaults (webhook controller: %d concurrent deliveries).\n\n", nTasks, nAccounts, conc, controllers.DefaultOptions().Webhooks.Concurrency)
	fmt.Println("| deliveries/s (first → last delivery) | deliveries/s (first terminal → last delivery) | first create → last delivery | create → first delivery p50 | p99 | terminal → first delivery p50 | p99 | `completedAt` → first delivery p50 | p99 | deliveries received |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	fmt.Printf("| %.0f | %.0f | %s | %s | %s | %s | %s | %s | %s | %d |\n\n", float64(len(lat))/lastDel.Sub(firstDel).Seconds(), float64(len(lat))/lastDel.Sub(firstTerm).Seconds(),
		harness.Ms(lastDel.Sub(firstCreate)), harness.Ms(harness.Quantile(latCreated, 0.5)), harness.Ms(harness.Quantile(latCreated, 0.99)),
		harness.Ms(harness.Quantile(lat, 0.5)), harness.Ms(harness.Quantile(lat, 0.99)),
		harness.Ms(harness.Quantile(latCompleted, 0.5)), harness.Ms(harness.Quantile(latCompleted, 0.99)), total)
	fmt.Println("\"Terminal\" is the moment the VideoTask controller's write of the terminal phase returned (measured by the client interceptor); `status.completedAt` has one-second resolution, so the second pair is only a cross-check. A webhook is due once the terminal write, which carries the charge decision, has landed.")
	fmt.Println()
	harness.PrintWrites(os.Stdout, counter, nTasks)
	return nil
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

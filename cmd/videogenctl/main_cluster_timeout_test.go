package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Every command gives up on a kube-apiserver that takes the request and never answers (an
// overloaded one, a stuck proxy or load balancer in front of it). Before, --request-timeout
// defaulted to kubectl's 0, no bound: account show, topup, apikey, connectors, the task
// commands and version waited forever, and a script that ran them hung with them. Now a request
// that gets no answer within --request-timeout (default 30s) ends the command with an error that
// names the flag, exit status 1 (2 for task watch, whose 1 says the task did not succeed).
// Pinned: task watch's stream stays open past that bound, one list and one watch for a task that
// ends later than it (cutting the stream would re-list every account's tasks every 30s).
func TestCommandsGiveUpOnAClusterThatNeverAnswers(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	defer func(d time.Duration) { defaultRequestTimeout = d }(defaultRequestTimeout)
	defaultRequestTimeout = 500 * time.Millisecond

	// The proxy takes every request and answers none until the client gives up or the test ends.
	done := make(chan struct{})
	silent := kubeProxy(t, env, func(_ http.ResponseWriter, r *http.Request, _ http.Handler) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	})
	t.Cleanup(func() { close(done) }) // before the proxy's Close, which waits for its handlers
	type result struct {
		args []string
		err  error
	}
	commands := [][]string{
		{"account", "show", "acme"},
		{"account", "create", "acme"},
		{"topup", "acme", "10", "--reference", "INV-1"},
		{"apikey", "list"},
		{"apikey", "create", "--account", "acme"},
		{"apikey", "revoke", "0123456789ab"},
		{"connectors"},
		{"task", "list"},
		{"task", "get", "vt-1", "-n", "acme"},
		{"task", "cancel", "vt-1", "-n", "acme"},
		{"task", "watch", "vt-1", "-n", "acme"},
		{"task", "watch", "-n", "acme"},
		{"version"},
	}
	results := make(chan result, len(commands))
	for _, args := range commands {
		go func() {
			results <- result{args, run(ctx, append(args, silent...), io.Discard)}
		}()
	}
	guard := time.After(20 * time.Second)
	for range commands {
		select {
		case r := <-results:
			want := 1
			if r.args[0] == "task" && r.args[1] == "watch" {
				want = exitWatchFailed
			}
			if r.err == nil || !strings.Contains(r.err.Error(), "--request-timeout") || exitCode(r.err) != want {
				t.Errorf("%s against a cluster that never answers: %v (exit %d); want exit %d with an error naming --request-timeout",
					strings.Join(r.args, " "), r.err, exitCode(r.err), want)
			}
		case <-guard:
			t.Fatalf("commands still waiting 20s after they started, against a cluster that never answers (request timeout %s)", defaultRequestTimeout)
		}
	}

	// task watch NAME follows a task that ends well after the request timeout with one stream.
	mustCreateNamespace(t, ctx, c, "acme")
	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-1"},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
			Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}
	if err := c.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	var lists, watches atomic.Int32
	counted := kubeProxy(t, env, func(w http.ResponseWriter, r *http.Request, proxy http.Handler) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/namespaces/acme/videotasks") {
			if r.URL.Query().Get("watch") == "true" {
				watches.Add(1)
			} else {
				lists.Add(1)
			}
		}
		proxy.ServeHTTP(w, r)
	})
	watched := make(chan error, 1)
	watchCtx, stopWatch := context.WithCancel(ctx)
	t.Cleanup(stopWatch) // before the proxy's Close, which waits for the watch's connection
	go func() {
		watched <- run(watchCtx, append([]string{"task", "watch", "vt-1", "-n", "acme"}, counted...), io.Discard)
	}()
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return watches.Load() > 0, nil
	}); err != nil {
		t.Fatal("task watch opened no watch")
	}
	time.Sleep(4 * defaultRequestTimeout) // the stream outlives the bound of a request
	cost := int64(10)
	task.Status = videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskSucceeded, Progress: 100, Cost: &cost, Charge: videogenv1alpha1.ChargeDeducted,
		Result: &videogenv1alpha1.TaskResult{URL: "https://media.example/out.mp4"}}
	if err := c.Status().Update(ctx, task); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-watched:
		if err != nil || lists.Load() != 1 || watches.Load() != 1 {
			t.Errorf("task watch of a task that succeeded %s after the watch began: %v, %d lists and %d watches; want success with one of each",
				4*defaultRequestTimeout, err, lists.Load(), watches.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("task watch did not see the task succeed")
	}
}

package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Shell completion gives up fast on a kube-apiserver that takes the request and never answers:
// pressing TAB ran __complete, whose account and task names come from the cluster, and the shell
// hung for the whole default --request-timeout (30s). Now completion waits at most
// completionTimeout (3s) unless --request-timeout is given, and offers no names.
func TestCompletionGivesUpFastOnAClusterThatNeverAnswers(t *testing.T) {
	env, ctx, _ := startControlPlane(t)
	done := make(chan struct{})
	silent := kubeProxy(t, env, func(_ http.ResponseWriter, r *http.Request, _ http.Handler) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	})
	t.Cleanup(func() { close(done) }) // before the proxy's Close, which waits for its handlers

	// The word being completed comes last, so the connection flags go first.
	completions := [][]string{
		{"account", "show", ""},           // completeAccounts, an argument
		{"task", "get", "-n", ""},         // completeAccounts, a flag
		{"task", "get", "-n", "acme", ""}, // completeTasks
	}
	type result struct {
		args []string
		out  string
		err  error
	}
	results := make(chan result, len(completions))
	for _, args := range completions {
		go func() {
			var out bytes.Buffer
			err := run(ctx, append(append([]string{"__complete"}, silent...), args...), &out)
			results <- result{args, out.String(), err}
		}()
	}
	guard := time.After(15 * time.Second)
	for range completions {
		select {
		case r := <-results:
			// No names, then cobra's directive line: 4 is ShellCompDirectiveNoFileComp.
			if r.err != nil || r.out != ":4\n" {
				t.Errorf("__complete %s against a cluster that never answers: %v, printed %q; want no names and :4",
					strings.Join(r.args, " "), r.err, r.out)
			}
		case <-guard:
			t.Fatalf("completion still waiting 15s after it started, against a cluster that never answers (completion timeout %s)", completionTimeout)
		}
	}
}

package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/hack/bench/internal/harness"
)

// timelineStep is how often the timeline samples CPU.
const timelineStep = 250 * time.Millisecond

// timeline records a run's task phase in steps: where the cores went, and which writes landed,
// so that a stretch where the control plane idles (every task waiting for something) shows.
// A nil *timeline records nothing.
type timeline struct {
	mu      sync.Mutex
	writes  []timedWrite
	samples []cpuSample
	done    chan struct{}
	stopped chan struct{}
}

type timedWrite struct {
	at   time.Time
	what string // "create", "status", "account"
}

type cpuSample struct {
	at  time.Time
	cpu harness.CPU
}

// write notes a successful write of the stack's clients.
func (t *timeline) write(at time.Time, verb string, obj client.Object) {
	if t == nil {
		return
	}
	what := ""
	switch obj.(type) {
	case *videogenv1alpha1.VideoTask:
		switch verb {
		case "create":
			what = "create"
		case "status update":
			what = "status"
		}
	case *videogenv1alpha1.PointAccount:
		what = "account"
	}
	if what == "" {
		return
	}
	t.mu.Lock()
	t.writes = append(t.writes, timedWrite{at, what})
	t.mu.Unlock()
}

// start samples every process's CPU each step until stop.
func (t *timeline) start() {
	if t == nil {
		return
	}
	t.done, t.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(t.stopped)
		tick := time.NewTicker(timelineStep)
		defer tick.Stop()
		for {
			s := cpuSample{time.Now(), harness.ReadCPU()}
			t.mu.Lock()
			t.samples = append(t.samples, s)
			t.mu.Unlock()
			select {
			case <-t.done:
				return
			case <-tick.C:
			}
		}
	}()
}

func (t *timeline) stop() {
	if t == nil || t.done == nil {
		return
	}
	close(t.done)
	<-t.stopped
}

// print writes one line a step: cores used by the control plane (kube-apiserver and etcd) and
// by this process, and the task creates, task status updates and account writes that landed.
func (t *timeline) print(w io.Writer, start, last time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintln(w, "timeline: ms from the first submission | cores: control plane, this process | writes landed: task creates, task status updates, account writes")
	for i := 1; i < len(t.samples); i++ {
		from, to := t.samples[i-1], t.samples[i]
		secs := to.at.Sub(from.at).Seconds()
		var plane, self float64
		for name, cpu := range to.cpu.Sub(from.cpu) {
			if name == "this process" {
				self += cpu
			} else {
				plane += cpu
			}
		}
		n := map[string]int{}
		for _, wr := range t.writes {
			if !wr.at.Before(from.at) && wr.at.Before(to.at) {
				n[wr.what]++
			}
		}
		fmt.Fprintf(w, "%6d | %.2f %.2f | %4d %4d %3d\n", from.at.Sub(start).Milliseconds(), plane/secs, self/secs,
			n["create"], n["status"], n["account"])
	}
	fmt.Fprintf(w, "last task settled at %d ms\n", last.Sub(start).Milliseconds())
}

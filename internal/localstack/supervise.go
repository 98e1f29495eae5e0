package localstack

import (
	"context"
	"time"
)

// Restart backoff of a component that keeps exiting, as a kubelet's CrashLoopBackOff: the
// delay doubles while the component exits within crashWindow of its start, up to maxBackoff.
const (
	minBackoff  = time.Second
	maxBackoff  = 30 * time.Second
	crashWindow = 30 * time.Second
)

// Supervise restarts a component that exits, as its Deployment would, until ctx ends: an
// operator can practise the drills of docs/reliability.md (kill -9 the manager or a replica)
// on this machine. Each restart is logged with the exit and the new process id.
func (s *Stack) Supervise(ctx context.Context) {
	backoff := map[string]time.Duration{}
	restartAt := map[string]time.Time{}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, name := range s.components() {
			_, p, err := s.find(name)
			if err != nil || !p.exited() {
				continue
			}
			at, pending := restartAt[name]
			if !pending {
				d := minBackoff
				if prev, ok := backoff[name]; ok && time.Since(p.started) < crashWindow {
					d = min(2*prev, maxBackoff)
				}
				backoff[name], restartAt[name] = d, time.Now().Add(d)
				s.logf("%s exited (%s); restarting it in %s (log: %s)", name, p.exit(), d, s.path("logs", name+".log"))
				continue
			}
			if time.Now().Before(at) {
				continue
			}
			delete(restartAt, name)
			if err := s.Restart(name); err != nil {
				s.logf("restarting %s: %v", name, err)
				continue
			}
			_, p, _ = s.find(name)
			s.logf("restarted %s (pid %d)", name, p.cmd.Process.Pid)
		}
	}
}

// components are the names of the stack's processes, in start order.
func (s *Stack) components() []string {
	names := make([]string, 0, len(s.procs))
	seen := map[string]bool{}
	for _, p := range s.procs {
		if !seen[p.name] {
			seen[p.name] = true
			names = append(names, p.name)
		}
	}
	return names
}

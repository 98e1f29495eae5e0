package localstack

import (
	"fmt"
	"syscall"
)

// Fault injection for crash tests. These methods are not safe for concurrent use with each
// other or with Stop: call them from one goroutine.

// find returns the newest process of a component (manager, apiserver, worker).
func (s *Stack) find(name string) (int, *process, error) {
	for i := len(s.procs) - 1; i >= 0; i-- {
		if s.procs[i].name == name {
			return i, s.procs[i], nil
		}
	}
	return 0, nil, fmt.Errorf("the stack runs no %q process", name)
}

// Kill ends a component with SIGKILL, as a crash or an OOM kill would, and waits until it
// is gone. Killing a component that already exited does nothing.
func (s *Stack) Kill(name string) error {
	_, p, err := s.find(name)
	if err != nil {
		return err
	}
	if p.exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !p.exited() {
		return fmt.Errorf("killing %s: %w", name, err)
	}
	<-p.done
	return nil
}

// Restart starts a component again with the arguments it was first started with, killing it
// first if it still runs. Its log continues in the same file.
func (s *Stack) Restart(name string) error {
	i, p, err := s.find(name)
	if err != nil {
		return err
	}
	if err := s.Kill(name); err != nil {
		return err
	}
	s.procs = append(s.procs[:i], s.procs[i+1:]...)
	if _, err := s.spawn(name, p.cmd.Args[1:]...); err != nil {
		// Keep the dead process listed, so that checkProcesses reports it.
		s.procs = append(s.procs, p)
		return err
	}
	return nil
}

// Running reports whether a component's newest process is still running.
func (s *Stack) Running(name string) bool {
	_, p, err := s.find(name)
	return err == nil && !p.exited()
}

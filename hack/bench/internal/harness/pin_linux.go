package harness

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// PinControlPlane puts the control plane (this process's children: kube-apiserver and etcd) on
// CPU 0 and this process (the load, and the REST apiserver and manager where they run
// in-process) on the other CPUs. On a cluster the two run on different nodes; pinned, a rate
// is bounded by the control plane alone, not by what the operator takes from the same cores.
// Every thread is pinned; threads started later inherit their parent thread's set.
func PinControlPlane() error {
	n := runtime.NumCPU()
	if n < 2 {
		return fmt.Errorf("pinning needs 2 CPUs, this machine has %d", n)
	}
	var control, rest unix.CPUSet
	control.Set(0)
	for i := 1; i < n; i++ {
		rest.Set(i)
	}
	kids := children()
	for d, s := range kids {
		if err := pinThreads(d, &control); err != nil {
			return fmt.Errorf("pinning %s: %w", s.comm, err)
		}
	}
	if len(kids) == 0 {
		return fmt.Errorf("no control-plane process among this process's children")
	}
	runtime.GOMAXPROCS(n - 1)
	return pinThreads("/proc/self", &rest)
}

// pinThreads sets the CPU affinity of every thread of the process at procDir.
func pinThreads(procDir string, set *unix.CPUSet) error {
	tasks, err := filepath.Glob(filepath.Join(procDir, "task", "[0-9]*"))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(filepath.Base(t))
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH { // ESRCH: the thread ended
			return err
		}
	}
	return nil
}

package harness

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPU is the CPU time (user + system, seconds) each process of the run has used so far: this
// process (the load generator, and the REST apiserver and manager where they run in-process)
// and the control plane's own processes, found as this process's children by command name.
type CPU map[string]float64

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times; 100 on every Linux platform Go
// supports.
const clockTicks = 100

// ReadCPU samples the CPU time of this process and of its children (kube-apiserver, etcd).
// Off Linux it returns an empty CPU.
func ReadCPU() CPU {
	out := CPU{}
	self := os.Getpid()
	if s, ok := procStat(strconv.Itoa(self)); ok {
		out["this process"] = s.cpu
	}
	for _, s := range children() {
		out[s.comm] += s.cpu
	}
	return out
}

// children are this process's child processes (the control plane), by /proc directory.
func children() map[string]stat {
	self := os.Getpid()
	out := map[string]stat{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if s, ok := procStat(filepath.Base(d)); ok && s.ppid == self {
			out[d] = s
		}
	}
	return out
}

type stat struct {
	comm string
	ppid int
	cpu  float64
}

// procStat parses /proc/<pid>/stat: "pid (comm) state ppid … utime stime …" (fields 14, 15).
func procStat(pid string) (stat, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return stat{}, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return stat{}, false
	}
	f := strings.Fields(s[end+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return stat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return stat{comm: s[open+1 : end], ppid: ppid, cpu: (utime + stime) / clockTicks}, true
}

// Sub is the CPU used between before and c.
func (c CPU) Sub(before CPU) CPU {
	d := CPU{}
	for k, v := range c {
		d[k] = v - before[k]
	}
	return d
}

// Add is the CPU of two spans together.
func (c CPU) Add(o CPU) CPU {
	d := CPU{}
	for k, v := range c {
		d[k] = v
	}
	for k, v := range o {
		d[k] += v
	}
	return d
}

// PerItem formats the milliseconds per item of the kube-apiserver, etcd and this process.
func (c CPU) PerItem(n int) string {
	f := func(p string) float64 { return c[p] * 1000 / float64(n) }
	return fmt.Sprintf("kube-apiserver %.2f, etcd %.2f, this %.2f", f("kube-apiserver"), f("etcd"), f("this process"))
}

// Total is the sum over processes.
func (c CPU) Total() float64 {
	var t float64
	for _, v := range c {
		t += v
	}
	return t
}

// ControlPlane is the kube-apiserver's and etcd's CPU together: what a cluster's control plane
// spends, wherever the operator's own processes run.
func (c CPU) ControlPlane() float64 {
	return c["kube-apiserver"] + c["etcd"]
}

// Phase is the CPU a part of a run used, over the items (tasks, creates) it did in wall time.
type Phase struct {
	Name  string
	CPU   CPU
	Items int
	Wall  time.Duration
}

// PrintCPU prints CPU milliseconds per item for each phase, per process, so that phases of one
// run compare side by side (a raw create against a whole task's life), and how many of the
// machine's cores the phase kept busy.
func PrintCPU(w io.Writer, phases []Phase) {
	procs := []string{"kube-apiserver", "etcd", "this process"}
	for _, ph := range phases {
		if _, ok := ph.CPU["manager"]; ok && len(procs) == 3 {
			procs = append(procs, "manager")
		}
	}
	fmt.Fprintln(w, "| phase | "+strings.Join(procs, " | ")+" | all | cores busy |")
	fmt.Fprintln(w, "|---|"+strings.Repeat("---:|", len(procs)+2))
	for _, ph := range phases {
		n := float64(ph.Items)
		fmt.Fprintf(w, "| %s |", ph.Name)
		for _, p := range procs {
			fmt.Fprintf(w, " %.2f |", ph.CPU[p]*1000/n)
		}
		fmt.Fprintf(w, " %.2f | %.2f |\n", ph.CPU.Total()*1000/n, ph.CPU.Total()/ph.Wall.Seconds())
	}
}

// Command statuscost measures the CPU (kube-apiserver, etcd, client) that a VideoTask's create
// costs, and a create followed by one status update, for statuses of different sizes, side by
// side in one run (two rounds of every variant). It shows what a task's one status write costs
// against a create, whatever the operator does around it.
//
//	go run ./hack/bench/statuscost [-n 1000 -c 32 -kube-cpuprofile status.prof]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/hack/bench/internal/harness"
)

func main() {
	n := flag.Int("n", 1000, "objects per variant")
	c := flag.Int("c", 32, "concurrency")
	prof := flag.String("kube-cpuprofile", "", "after the table, profile the kube-apiserver over 8 s of status updates alone (finished status) into this file")
	flag.Parse()
	ctx, cancel := harness.Bounded(8 * time.Minute)
	defer cancel()
	env, err := harness.Start(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer env.Stop()
	_ = env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "s"}})
	variants := []struct {
		name   string
		status func(t *videogenv1alpha1.VideoTask) *videogenv1alpha1.VideoTaskStatus
	}{
		{"create only", nil},
		{"finished status", func(t *videogenv1alpha1.VideoTask) *videogenv1alpha1.VideoTaskStatus {
			s := harness.FinishedStatus(t, true, time.Now())
			return &s
		}},
		{"phase, charge, closed only", func(t *videogenv1alpha1.VideoTask) *videogenv1alpha1.VideoTaskStatus {
			return &videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskSucceeded, Cost: ptr.To[int64](10), Charge: videogenv1alpha1.ChargeDeducted, Closed: true}
		}},
		{"finished, no conditions", func(t *videogenv1alpha1.VideoTask) *videogenv1alpha1.VideoTaskStatus {
			s := harness.FinishedStatus(t, true, time.Now())
			s.Conditions = nil
			return &s
		}},
		{"finished, no stages", func(t *videogenv1alpha1.VideoTask) *videogenv1alpha1.VideoTaskStatus {
			s := harness.FinishedStatus(t, true, time.Now())
			s.Stages = nil
			return &s
		}},
	}
	_ = harness.Run(ctx, 200, *c, func(ctx context.Context, _ int) error { return env.Client.Create(ctx, harness.Task("s", "")) })
	var phases []harness.Phase
	for round := 0; round < 2; round++ {
		for _, v := range variants {
			before := harness.ReadCPU()
			r := harness.Run(ctx, *n, *c, func(ctx context.Context, _ int) error {
				t := harness.Task("s", "")
				if err := env.Client.Create(ctx, t); err != nil {
					return err
				}
				if v.status == nil {
					return nil
				}
				t.Status = *v.status(t)
				return env.Client.Status().Update(ctx, t)
			})
			if err := r.Check(v.name); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			phases = append(phases, harness.Phase{Name: fmt.Sprintf("%s (%.0f/s)", v.name, r.Rate()), CPU: harness.ReadCPU().Sub(before), Items: *n, Wall: r.Elapsed})
		}
	}
	fmt.Println("### What a status update costs the control plane")
	fmt.Println()
	fmt.Println("Machine:", harness.Machine())
	fmt.Println()
	fmt.Printf("Each row: %d VideoTasks created at c=%d, each then given one status update of the kind named (none for \"create only\"); CPU ms per object from /proc (user + system), two rounds of every variant.\n\n", *n, *c)
	harness.PrintCPU(os.Stdout, phases)
	if *prof == "" {
		return
	}
	tasks := make([]*videogenv1alpha1.VideoTask, 4000)
	_ = harness.Run(ctx, len(tasks), *c, func(ctx context.Context, i int) error {
		tasks[i] = harness.Task("s", "")
		return env.Client.Create(ctx, tasks[i])
	})
	done := make(chan error)
	go func() { done <- env.KubeProfile(ctx, 8*time.Second, *prof) }()
	before := harness.ReadCPU()
	r := harness.Run(ctx, len(tasks), *c, func(ctx context.Context, i int) error {
		tasks[i].Status = harness.FinishedStatus(tasks[i], true, time.Now())
		return env.Client.Status().Update(ctx, tasks[i])
	})
	harness.PrintCPU(os.Stdout, []harness.Phase{{Name: fmt.Sprintf("status update alone (%.0f/s)", r.Rate()), CPU: harness.ReadCPU().Sub(before), Items: len(tasks), Wall: r.Elapsed}})
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/taskview"
)

// taskRow is what `tasks` prints per task.
type taskRow struct {
	Account    string `json:"account"`
	ID         string `json:"id"`
	Capability string `json:"capability"`
	Status     string `json:"status"`
	// Phase is the generation stage the task is in (analyze, render) or ended in.
	Phase     string    `json:"phase,omitempty"`
	Progress  int32     `json:"progress"`
	Cost      *int64    `json:"cost"`
	Charge    string    `json:"charge"`
	Reason    string    `json:"reason,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// tasksCommand lists tasks, newest first, with their phase and cost.
func tasksCommand(ctx context.Context, args []string, out io.Writer) error {
	var g globals
	var account string
	var limit int
	fs := flag.NewFlagSet("tasks", flag.ContinueOnError)
	g.bind(fs)
	fs.StringVar(&account, "account", "", "only this account's tasks (default: all accounts)")
	fs.IntVar(&limit, "limit", 50, "at most this many tasks")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	c, err := g.kubeClient()
	if err != nil {
		return err
	}
	var list videogenv1alpha1.VideoTaskList
	var opts []client.ListOption
	if account != "" {
		opts = append(opts, client.InNamespace(account))
	}
	if err := c.List(ctx, &list, opts...); err != nil {
		return err
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].CreationTimestamp.After(list.Items[j].CreationTimestamp.Time)
	})
	rows := []taskRow{}
	for i := range list.Items {
		if len(rows) == limit {
			break
		}
		t := &list.Items[i]
		v := taskview.Of(t)
		row := taskRow{Account: t.Namespace, ID: t.Name, Capability: v.Capability, Status: v.Status, Phase: ptr.Deref(v.Phase, ""),
			Progress: v.Progress, Cost: v.Cost, Charge: string(t.Status.Charge), CreatedAt: t.CreationTimestamp.Time}
		if cond := meta.FindStatusCondition(t.Status.Conditions, videogenv1alpha1.ConditionComplete); cond != nil {
			row.Reason = cond.Reason
		}
		rows = append(rows, row)
	}
	return g.print(out, rows, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "ACCOUNT\tID\tCAPABILITY\tSTATUS\tPHASE\tPROGRESS\tCOST\tCHARGE\tREASON\tAGE")
		for _, r := range rows {
			cost := "-"
			if r.Cost != nil {
				cost = fmt.Sprint(*r.Cost)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d%%\t%s\t%s\t%s\t%s\n", r.Account, r.ID, r.Capability, r.Status, orDash(r.Phase), r.Progress,
				cost, orDash(r.Charge), orDash(r.Reason), time.Since(r.CreatedAt).Round(time.Second))
		}
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

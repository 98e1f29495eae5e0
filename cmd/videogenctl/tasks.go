package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/taskview"
)

// newTaskCommands returns `task` (list, get, watch, cancel) and `tasks`, the list under the
// name it had before the task commands.
func newTaskCommands(o *options) []*cobra.Command {
	task := &cobra.Command{Use: "task", Short: "List, show, watch and cancel tasks (VideoTasks)"}
	complete := firstArg(o.completeTasks)
	get := &cobra.Command{
		Use:               "get NAME [-n ACCOUNT]",
		Aliases:           []string{"show"}, // as in `account show`
		Short:             "Show a task: phase, stages, cost, result or error",
		Args:              exactArgs(1),
		ValidArgsFunction: complete,
		RunE: func(cmd *cobra.Command, args []string) error {
			return taskGet(cmd.Context(), o, args[0])
		},
	}
	watchCmd := &cobra.Command{
		Use:   "watch [NAME] [-n ACCOUNT]",
		Short: "Print tasks as they change; with NAME, until it ends (exit status 1 if it did not succeed, 2 on an error)",
		Long: `Print a line (or, with -o, the object) each time a task changes; a task deleted before it
ended shows as deleting while the operator stops its work. With NAME, watch that
task until it ends: exit status 0 if it succeeded, 1 if it ended otherwise (failed, canceled, or
deleted before it ended), 2 if it could not be followed (no such task, the cluster unreachable,
interrupted before it ended), as kubectl diff tells its answer from its errors. Without it, watch the tasks of -n ACCOUNT (of every account when no namespace is given),
those already there listed oldest first, until interrupted (exit status 0), or 2 on an error (the cluster unreachable, an account that
does not exist).`,
		ValidArgsFunction: complete,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			// Every error is 2, with NAME or without: 1 is only the answer that the task did
			// not succeed.
			err := taskWatch(cmd.Context(), o, name)
			if err != nil && !errors.Is(err, errTaskDidNotSucceed) {
				return &exitError{code: exitWatchFailed, err: err}
			}
			return err
		},
	}
	cancel := &cobra.Command{
		Use:               "cancel NAME [-n ACCOUNT]",
		Short:             "Ask the operator to stop a queued or running task; its points are refunded",
		Args:              exactArgs(1),
		ValidArgsFunction: complete,
		RunE: func(cmd *cobra.Command, args []string) error {
			return taskCancel(cmd.Context(), o, args[0])
		},
	}
	// A command line it cannot parse is an error too, not the answer 1 (a script's "the task
	// failed" for `task watch vt-1 --timeout 10m`, a flag kubectl wait has).
	watchCmd.Args = func(cmd *cobra.Command, args []string) error {
		if err := cobra.MaximumNArgs(1)(cmd, args); err != nil {
			return &exitError{code: exitWatchFailed, err: err}
		}
		return nil
	}
	watchCmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: exitWatchFailed, err: err} })
	task.AddCommand(newTaskListCommand(o, "list"), get, watchCmd, cancel)
	tasks := newTaskListCommand(o, "tasks")
	tasks.Short = "List tasks, newest first (task list)"
	return []*cobra.Command{task, tasks}
}

func newTaskListCommand(o *options, use string) *cobra.Command {
	var account string
	var limit int
	cmd := &cobra.Command{
		Use:   use + " [-n ACCOUNT] [--limit N]",
		Short: "List tasks, newest first, of one account (-n) or of all",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return fmt.Errorf("--limit must be 0 or more, not %d; usage: %s", limit, cmd.UseLine())
			}
			return taskList(cmd.Context(), o, account, limit)
		},
	}
	cmd.Flags().StringVar(&account, "account", "", "only this account's tasks, like -n (default: all accounts)")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many tasks; 0 lists them all")
	_ = cmd.RegisterFlagCompletionFunc("account", o.completeAccounts)
	return cmd
}

// taskRow is what the task commands print per task in a table.
type taskRow struct {
	Account    string
	ID         string
	Capability string
	Status     string
	// Phase is the generation stage the task is in (analyze, render) or ended in.
	Phase     string
	Progress  int32
	Cost      *int64
	Charge    string
	Reason    string
	CreatedAt time.Time
}

// statusDeleting is the STATUS of a task deleted before it ended, while its finalizer stops its
// work (up to two minutes): as kubectl's Terminating, or a watch showed nothing all that time
// and the table still said running.
const statusDeleting = "deleting"

func rowOf(t *videogenv1alpha1.VideoTask) taskRow {
	v := taskview.Of(t)
	if !t.DeletionTimestamp.IsZero() && !t.Status.Phase.Terminal() {
		v.Status = statusDeleting
	}
	return taskRow{Account: t.Namespace, ID: t.Name, Capability: v.Capability, Status: v.Status, Phase: phaseOf(t, ptr.Deref(v.Phase, "")),
		Progress: v.Progress, Cost: v.Cost, Charge: string(t.Status.Charge), Reason: reasonOf(t), CreatedAt: t.CreationTimestamp.Time}
}

// phaseOf is the stage a task is in (running, as the REST API's phase), or, once it ended, the
// last stage it reached: render for a success, the stage that failed or was stopped otherwise;
// "" for a task that ended before any stage started.
func phaseOf(t *videogenv1alpha1.VideoTask, running string) string {
	if running != "" || !t.Status.Phase.Terminal() {
		return running
	}
	ended := ""
	for _, name := range videogenv1alpha1.Stages {
		for _, st := range t.Status.Stages {
			if st.Name == name && st.State != "" && st.State != videogenv1alpha1.StagePending {
				ended = string(name)
			}
		}
	}
	return ended
}

// reasonOf is why the task ended, from its conditions.
func reasonOf(t *videogenv1alpha1.VideoTask) string {
	if cond := t.Status.Ending(); cond != nil {
		return cond.Reason
	}
	return ""
}

// cells are the row's values under taskColumns.
func (r taskRow) cells() []string {
	cost := "-"
	if r.Cost != nil {
		cost = fmt.Sprint(*r.Cost)
	}
	return []string{r.Account, r.ID, r.Capability, r.Status, orDash(r.Phase), fmt.Sprintf("%d%%", r.Progress),
		cost, orDash(r.Charge), orDash(r.Reason), time.Since(r.CreatedAt).Round(time.Second).String()}
}

// write writes the row to a tabwriter.
func (r taskRow) write(w io.Writer) {
	fmt.Fprintln(w, strings.Join(r.cells(), "\t"))
}

// listNamespace is the account a listing (or a new API key) is limited to: --account, else
// an explicit --namespace; empty (every account) when neither is given. Both, naming two
// accounts, are refused: either may be the one meant (a key issued for the other account
// spends its points).
func listNamespace(o *options, account string) (string, error) {
	ns, explicit, err := o.namespace()
	if err != nil {
		return "", err
	}
	switch {
	case account != "" && explicit && ns != account:
		return "", fmt.Errorf("%s and -n %s name different accounts: give one of them", account, ns)
	case account != "":
		return account, nil
	case explicit:
		return ns, nil
	}
	return "", nil
}

// taskList lists tasks, newest first, with their phase and cost.
func taskList(ctx context.Context, o *options, account string, limit int) error {
	printer, err := o.objectPrinter()
	if err != nil {
		return err
	}
	ns, err := listNamespace(o, account)
	if err != nil {
		return err
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	var list videogenv1alpha1.VideoTaskList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nameTheAccount(err, ns, "list")
	}
	newestTasksFirst(list.Items)
	if older := len(list.Items) - limit; limit > 0 && older > 0 {
		list.Items = list.Items[:limit]
		// After the listing, on stderr as the empty listing's note (out of a script's -o
		// output): a listing cut at --limit read as every task of the account.
		tasks := "tasks"
		if older == 1 {
			tasks = "task"
		}
		defer fmt.Fprintf(stderr, "(%d older %s not shown: --limit 0 lists them all)\n", older, tasks)
	}
	if len(list.Items) == 0 && (printer == nil || o.output == "name") {
		// As kubectl's "No resources found": a note on stderr for a person, exit status 0. For
		// the table and -o name, whose empty output says nothing (json and yaml print an empty
		// list, which says it).
		fmt.Fprintln(stderr, noTasksNote(ctx, c, ns))
		return nil
	}
	if printer != nil && o.output == "name" {
		// As kubectl: one name per task, not the list's.
		for i := range list.Items {
			if err := printer.PrintObj(&list.Items[i], o.out); err != nil {
				return err
			}
		}
		return nil
	}
	if printer != nil {
		return printer.PrintObj(&list, o.out)
	}
	tw := printers.GetNewTabWriter(o.out)
	fmt.Fprint(tw, taskHeader)
	for i := range list.Items {
		rowOf(&list.Items[i]).write(tw)
	}
	return tw.Flush()
}

// nameTheAccount explains a refusal to read every account's tasks (ns ""): an account's user,
// whose roles are in their namespace only, gets it without -n (the kubeconfig's namespace does
// not narrow it), and the kube-apiserver's "at the cluster scope" does not say what to do.
func nameTheAccount(err error, ns, verb string) error {
	if ns == "" && apierrors.IsForbidden(err) {
		return fmt.Errorf("%w; to %s one account's tasks, name it: %s task %s -n ACCOUNT", err, verb, displayName(), verb)
	}
	return err
}

// noTasksNote says that a listing is empty, and why when its account does not exist (a typo in
// -n, most likely).
func noTasksNote(ctx context.Context, c client.Reader, ns string) string {
	if ns == "" {
		return "No tasks found."
	}
	if has, known := hasAccount(ctx, c, ns); known && !has {
		return fmt.Sprintf("No tasks found: there is no account %q.", ns)
	}
	return fmt.Sprintf("No tasks found in account %q.", ns)
}

// hasAccount says whether namespace ns holds an account, as the task commands tell a typo in -n
// (or a namespace that is no account, such as the kubeconfig's "default") from an account
// without the tasks asked for. known is false when the kube-apiserver did not say (no right to
// read the account, the cluster unreachable): then no command claims that there is none.
func hasAccount(ctx context.Context, c client.Reader, ns string) (has, known bool) {
	_, err := getAccount(ctx, c, ns)
	switch {
	case err == nil:
		return true, true
	case apierrors.IsNotFound(err):
		return false, true
	}
	return false, false
}

// getTask reads one task of the namespace the flags name.
func getTask(ctx context.Context, o *options, c client.Client, name string) (*videogenv1alpha1.VideoTask, error) {
	ns, explicit, err := o.namespace()
	if err != nil {
		return nil, err
	}
	t := &videogenv1alpha1.VideoTask{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, t); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, taskNotFound(ctx, c, name, ns, explicit)
		case apierrors.IsForbidden(err) && !explicit:
			// An account's user, whose roles are in their account's namespace, asked in the
			// kubeconfig's.
			return nil, fmt.Errorf("%w; %s", err, nameTheTaskAccount(ns))
		}
		return nil, err
	}
	return t, nil
}

// taskNotFound says why there is no task name in namespace ns: there is no account ns (a typo
// in -n, or the kubeconfig's namespace, which the user may never have chosen), or the account
// has no such task. Without -n (explicit false) it says where ns came from and to name the
// task's account.
func taskNotFound(ctx context.Context, c client.Reader, name, ns string, explicit bool) error {
	has, known := hasAccount(ctx, c, ns)
	var msg string
	switch {
	case known && !has:
		msg = fmt.Sprintf("no task %q: there is no account %q", name, ns)
	case known:
		msg = fmt.Sprintf("no task %q in account %q", name, ns)
	default:
		msg = fmt.Sprintf("no task %q in namespace %q", name, ns)
	}
	if !explicit {
		return fmt.Errorf("%s; %s", msg, nameTheTaskAccount(ns))
	}
	if known && !has {
		return errors.New(msg)
	}
	return fmt.Errorf("%s (-n ACCOUNT names another)", msg)
}

// nameTheTaskAccount says that the task commands looked in the kubeconfig's namespace ns, no
// -n given, and how to name the task's account.
func nameTheTaskAccount(ns string) string {
	return fmt.Sprintf("%q is the kubeconfig's namespace, as no -n was given: name the task's account with -n ACCOUNT", ns)
}

func taskGet(ctx context.Context, o *options, name string) error {
	printer, err := o.objectPrinter()
	if err != nil {
		return err
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	t, err := getTask(ctx, o, c, name)
	if err != nil {
		return err
	}
	if printer != nil {
		return printer.PrintObj(t, o.out)
	}
	return taskDetails(o.out, t)
}

// taskDetails is task get's table: the task's row, its stages, and its result or error, each
// a section of its own (sections).
func taskDetails(out io.Writer, t *videogenv1alpha1.VideoTask) error {
	return sections(out,
		func(w io.Writer) {
			fmt.Fprint(w, taskHeader)
			rowOf(t).write(w)
		},
		// A backend's message, result URL and error are its own text (the HTTP backend's status
		// answer, unchecked): escaped, as account show's notes.
		func(w io.Writer) {
			if len(t.Status.Stages) == 0 {
				return
			}
			fmt.Fprint(w, "\nSTAGE\tSTATE\tPROGRESS\tBACKEND\tMESSAGE\n")
			for _, s := range t.Status.Stages {
				fmt.Fprintf(w, "%s\t%s\t%d%%\t%s\t%s\n", s.Name, s.State, s.Progress, orDash(terminalSafe(s.Backend)), orDash(terminalSafe(s.Message)))
			}
		},
		func(w io.Writer) {
			if r := t.Status.Result; r != nil {
				fmt.Fprintf(w, "\nRESULT\t%s\n", terminalSafe(r.URL))
			}
			if e := t.Status.Error; e != nil {
				fmt.Fprintf(w, "\nERROR\t%s: %s\n", terminalSafe(e.Code), terminalSafe(e.Message))
			}
		})
}

// sections writes each section through a tabwriter of its own, flushed before the next:
// kubectl's (printers.GetNewTabWriter) remembers column widths across blank lines and flushes,
// and a section's columns are not the one's above it (a stage's STATE was padded to the task's
// ID). Written into another tabwriter (o.print's), the lines carry no tab, and pass as they are.
func sections(out io.Writer, write ...func(io.Writer)) error {
	for _, section := range write {
		tw := printers.GetNewTabWriter(out)
		section(tw)
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func taskCancel(ctx context.Context, o *options, name string) error {
	// Checked before the cancel: a typo in -o must not cancel and then say nothing of it.
	printer, err := o.objectPrinter()
	if err != nil {
		return err
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	t, err := getTask(ctx, o, c, name)
	if err != nil {
		return err
	}
	// As the REST API answers: canceling a canceled task again is done, not an error, so a
	// retried cancel exits 0.
	status := taskview.Status(t)
	if status == taskview.StatusCanceled {
		if printer != nil {
			return printer.PrintObj(t, o.out)
		}
		fmt.Fprintf(o.out, "task %s is canceled; its points were refunded\n", t.Name)
		return nil
	}
	if t.Status.Phase.Terminal() {
		return fmt.Errorf("task %s already %s and cannot be canceled", t.Name, status)
	}
	if t, err = requestCancel(ctx, c, t); err != nil {
		return err
	}
	// t is now the patch's answer: a task that ended since the read above (a success charged)
	// took the annotation, but nothing cancels or refunds a finished task.
	if ended := taskview.Status(t); t.Status.Phase.Terminal() && ended != taskview.StatusCanceled {
		return fmt.Errorf("task %s already %s and cannot be canceled", t.Name, ended)
	}
	if printer != nil {
		return printer.PrintObj(t, o.out)
	}
	// Not "refunded" outright: a stage that finished before the cancel reached it still wins
	// (docs/backend-protocol.md), and the task is then charged as any success.
	fmt.Fprintf(o.out, "cancel requested for task %s; it stops and its points are refunded, unless it finishes first (%s task watch %s -n %s)\n",
		t.Name, displayName(), t.Name, t.Namespace)
	return nil
}

// requestCancel asks the operator to cancel t and returns the task as the cancel left it.
func requestCancel(ctx context.Context, c client.Client, t *videogenv1alpha1.VideoTask) (*videogenv1alpha1.VideoTask, error) {
	// A merge patch of the annotation, as the REST API cancels: no read-modify-write race.
	patch := []byte(`{"metadata":{"annotations":{"` + videogenv1alpha1.AnnotationCancelRequested + `":"true"}}}`)
	if err := c.Patch(ctx, t, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return cancelLanded(ctx, c, t, err)
	}
	return t, nil
}

// cancelLanded is the task as stored when the cancel patch that failed with err landed all the
// same (a 504 "request did not complete within requested timeout", a connection dropped after
// the request was sent): its annotation says so, and the cancel is done as asked. Otherwise the
// error, saying whether the cancel may have been recorded.
func cancelLanded(ctx context.Context, c client.Reader, t *videogenv1alpha1.VideoTask, err error) (*videogenv1alpha1.VideoTask, error) {
	if refusedForSure(err) {
		return nil, fmt.Errorf("canceling task %s: %w", t.Name, err)
	}
	readCtx, cancel := context.WithTimeout(ctx, topUpRead)
	defer cancel()
	stored := &videogenv1alpha1.VideoTask{}
	if gerr := c.Get(readCtx, client.ObjectKeyFromObject(t), stored); gerr == nil && stored.UID == t.UID {
		if _, asked := stored.Annotations[videogenv1alpha1.AnnotationCancelRequested]; asked { // any value, as the controller reads it
			return stored, nil
		}
	}
	return nil, fmt.Errorf("canceling task %s: %w; the cluster did not say that it refused it, so the cancel may have been recorded all the same: "+
		"see %s task get %s -n %s, or cancel it again (a cancel asked for twice is no error)", t.Name, err, displayName(), t.Name, t.Namespace)
}

// errTaskDidNotSucceed makes `task watch NAME` exit non-zero for a task that failed.
var errTaskDidNotSucceed = errors.New("did not succeed")

// taskWatch prints tasks as they change: one task until it ends, or a namespace's (every
// account's) until the context ends.
func taskWatch(ctx context.Context, o *options, name string) error {
	printer, err := o.objectPrinter()
	if err != nil {
		return err
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	wc, err := o.watchClient()
	if err != nil {
		return err
	}
	var opts []client.ListOption
	// account is the one watched, "" for every account.
	var account string
	// last is the watched task as last read, for what to say when it is gone.
	var last *videogenv1alpha1.VideoTask
	if name != "" {
		t, err := getTask(ctx, o, c, name)
		if err != nil {
			return err
		}
		last = t
		account = t.Namespace
		opts = append(opts, client.InNamespace(t.Namespace), client.MatchingFields{"metadata.name": name})
	} else {
		if account, err = listNamespace(o, ""); err != nil {
			return err
		}
		if err := requireWatchable(ctx, c, account); err != nil {
			return err
		}
		opts = append(opts, client.InNamespace(account))
	}
	table := newWatchTable(o.out)
	table.widen("ACCOUNT", account)
	table.widen("ID", name)
	shown := map[string]taskRow{}
	// changed says whether t's row differs from the one last shown for it, and keeps it.
	changed := func(t *videogenv1alpha1.VideoTask) bool {
		row := rowOf(t)
		key := t.Namespace + "/" + t.Name
		if last, ok := shown[key]; ok && sameRow(last, row) {
			return false
		}
		shown[key] = row
		return true
	}
	// show prints the tasks given (as one table: a listing lines up within itself), and returns
	// the watched task if it has ended.
	show := func(tasks ...*videogenv1alpha1.VideoTask) (*videogenv1alpha1.VideoTask, error) {
		var rows [][]string
		for _, t := range tasks {
			if printer != nil {
				if err := printer.PrintObj(t, o.out); err != nil {
					return t, err
				}
			} else {
				rows = append(rows, shown[t.Namespace+"/"+t.Name].cells())
			}
		}
		if printer == nil {
			if err := table.print(rows...); err != nil {
				return nil, err
			}
		}
		for _, t := range tasks {
			if name != "" && t.Status.Phase.Terminal() {
				return t, nil
			}
		}
		return nil, nil
	}
	for {
		var list videogenv1alpha1.VideoTaskList
		if err := c.List(ctx, &list, opts...); err != nil {
			return nameTheAccount(err, account, "watch")
		}
		if name != "" && (len(list.Items) == 0 || list.Items[0].UID != last.UID) {
			// Deleted while no watch was open (between the get and this list, or between a
			// watch the kube-apiserver ended and this list): no event will ever say so. A task
			// of that name with another UID is another task, created since.
			return deletedOutcome(last)
		}
		if name != "" {
			last = &list.Items[0]
		}
		// Oldest first, the newest last, where the changes that follow are printed: the
		// kube-apiserver lists by name, which for the REST API's random ids is no order.
		newestTasksFirst(list.Items)
		slices.Reverse(list.Items)
		var listed []*videogenv1alpha1.VideoTask
		for i := range list.Items {
			if changed(&list.Items[i]) {
				listed = append(listed, &list.Items[i])
			}
		}
		if ended, err := show(listed...); err != nil || ended != nil {
			return outcome(ended, err)
		}
		w, err := wc.Watch(ctx, &videogenv1alpha1.VideoTaskList{},
			append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})...)
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			t, ok := ev.Object.(*videogenv1alpha1.VideoTask)
			if !ok || ev.Type == watch.Error || ev.Type == watch.Bookmark {
				continue
			}
			if ev.Type == watch.Deleted {
				if name != "" {
					w.Stop()
					return deletedOutcome(t) // the task as it was when deleted
				}
				delete(shown, t.Namespace+"/"+t.Name)
				continue
			}
			if !changed(t) {
				continue
			}
			if ended, err := show(t); err != nil || ended != nil {
				w.Stop()
				return outcome(ended, err)
			}
		}
		// The watch ended: the context is done, or the apiserver closed it; list again.
		if ctx.Err() != nil {
			if name != "" {
				// Not 0, which says the task succeeded: it has not ended.
				return fmt.Errorf("interrupted before task %s ended", name)
			}
			return nil
		}
	}
}

// newestTasksFirst orders tasks as GET /v1/tasks does: the kube-apiserver keeps
// creationTimestamp to the second, and tasks created within one second go by name, descending
// (vt-3 before vt-1).
func newestTasksFirst(items []videogenv1alpha1.VideoTask) {
	sort.Slice(items, func(i, j int) bool {
		a, b := &items[i], &items[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.After(b.CreationTimestamp.Time)
		}
		return a.Name > b.Name
	})
}

// requireWatchable refuses to watch an account that does not exist (a typo in -n, most likely),
// which would wait forever for tasks that never come. A namespace with tasks but no account
// (being closed) is still watched; so is any when the account cannot be read (no right to).
func requireWatchable(ctx context.Context, c client.Reader, ns string) error {
	if ns == "" {
		return nil
	}
	if has, known := hasAccount(ctx, c, ns); has || !known {
		return nil
	}
	var tasks videogenv1alpha1.VideoTaskList
	if err := c.List(ctx, &tasks, client.InNamespace(ns), client.Limit(1)); err != nil || len(tasks.Items) > 0 {
		return nil
	}
	return fmt.Errorf("there is no account %q to watch (-n ACCOUNT names another)", ns)
}

// deletedOutcome is the outcome of a watched task that is gone, t as it was last seen: one that
// had ended ended so; one deleted before it ended ended without a result, for good, which is
// "did not succeed" (exit status 1, as a failed or canceled task), not a watch that could not
// follow it (2): watching again cannot change the answer.
func deletedOutcome(t *videogenv1alpha1.VideoTask) error {
	if t.Status.Phase.Terminal() {
		return outcome(t, nil)
	}
	return fmt.Errorf("task %s was deleted before it ended, without a result: %w", t.Name, errTaskDidNotSucceed)
}

// outcome is nil for a task that succeeded, and says why for one that did not.
func outcome(t *videogenv1alpha1.VideoTask, err error) error {
	if err != nil || t.Status.Phase == videogenv1alpha1.TaskSucceeded {
		return err
	}
	why := reasonOf(t)
	if e := t.Status.Error; e != nil {
		why = e.Code + ": " + e.Message
	}
	// The backend's message, on the error line: escaped, its line breaks too.
	return fmt.Errorf("task %s %s (%s): %w", t.Name, taskview.Status(t), terminalSafe(why), errTaskDidNotSucceed)
}

func sameRow(a, b taskRow) bool {
	return a.Status == b.Status && a.Phase == b.Phase && a.Progress == b.Progress && ptr.Equal(a.Cost, b.Cost) &&
		a.Charge == b.Charge && a.Reason == b.Reason
}

// completeTasks completes the names of the tasks in the namespace the flags name.
func (o *options) completeTasks(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	ns, _, err := o.namespace()
	c, cerr := o.completionClient()
	if err != nil || cerr != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var list videogenv1alpha1.VideoTaskList
	if err := c.List(cmd.Context(), &list, client.InNamespace(ns)); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, t := range list.Items {
		names = append(names, t.Name)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

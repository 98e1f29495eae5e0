package main

import (
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/taskview"
)

// taskColumns head the task tables of task list, get and watch.
var taskColumns = []string{"ACCOUNT", "ID", "CAPABILITY", "STATUS", "PHASE", "PROGRESS", "COST", "CHARGE", "REASON", "AGE"}

var taskHeader = strings.Join(taskColumns, "\t") + "\n"

// knownTaskValues are the values a column can take, where they are few and known in advance.
var knownTaskValues = map[string][]string{
	"CAPABILITY": capabilityNames(),
	"STATUS":     {taskview.StatusQueued, taskview.StatusRunning, taskview.StatusSucceeded, taskview.StatusFailed, taskview.StatusCanceled, statusDeleting},
	"PHASE":      {string(videogenv1alpha1.StageAnalyze), string(videogenv1alpha1.StageRender)},
	"PROGRESS":   {"100%"},
	"CHARGE":     {string(videogenv1alpha1.ChargeFrozen), string(videogenv1alpha1.ChargeDeducted), string(videogenv1alpha1.ChargeRefunded)},
	// The reasons a task ends with (reasonOf); one not listed here only widens the column.
	"REASON": {videogenv1alpha1.ReasonSucceeded, videogenv1alpha1.ReasonStageFailed, videogenv1alpha1.ReasonTimedOut,
		videogenv1alpha1.ReasonCanceled, videogenv1alpha1.ReasonInsufficientBalance, videogenv1alpha1.ReasonAccountSuspended,
		videogenv1alpha1.ReasonAccountClosing, videogenv1alpha1.ReasonInvalidRequest, videogenv1alpha1.ReasonNoBackend,
		videogenv1alpha1.ReasonNoMedia, videogenv1alpha1.ReasonBackendUnavailable, videogenv1alpha1.ReasonTemplateUnavailable,
		videogenv1alpha1.ReasonEndedByHand},
}

func capabilityNames() []string {
	var names []string
	for _, c := range videogenv1alpha1.Capabilities {
		names = append(names, string(c))
	}
	return names
}

// Padding as kubectl's tables (printers.GetNewTabWriter): three spaces after a value, no column
// narrower than six.
const (
	columnPadding  = 3
	columnMinWidth = 6
)

// watchTable prints the rows of task watch as they come, in columns that line up from one row
// to the next. As kubectl get -w, the header is printed with the first listing, as one table,
// and a column is as wide as the widest value it has shown and never narrows. Beyond that, a
// column whose values are known in advance (capability, status, phase, progress, charge, reason;
// the account and the task watched) starts as wide as the widest of them, so a task going from
// queued to running to succeeded moves no column. Only a longer account, ID or cost than any
// before widens a column, from that row on.
type watchTable struct {
	out     io.Writer
	widths  []int
	started bool
}

func newWatchTable(out io.Writer) *watchTable {
	t := &watchTable{out: out, widths: make([]int, len(taskColumns))}
	for column, values := range knownTaskValues {
		t.widen(column, values...)
	}
	return t
}

// widen makes column wide enough for values.
func (t *watchTable) widen(column string, values ...string) {
	i := slices.Index(taskColumns, column)
	for _, v := range values {
		t.widths[i] = max(t.widths[i], cellWidth(v))
	}
}

// print writes rows (cells under taskColumns), the header first on the first call, the columns
// first widened to hold all of them.
func (t *watchTable) print(rows ...[]string) error {
	if !t.started {
		t.started = true
		rows = append([][]string{taskColumns}, rows...)
	}
	for _, row := range rows {
		for i, cell := range row {
			t.widths[i] = max(t.widths[i], cellWidth(cell))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for i, cell := range row {
			b.WriteString(cell)
			// The last column is not padded, as a tabwriter leaves it.
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", t.widths[i]-utf8.RuneCountInString(cell)))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(t.out, b.String())
	return err
}

// cellWidth is the width of a column holding s, padding included.
func cellWidth(s string) int { return max(utf8.RuneCountInString(s)+columnPadding, columnMinWidth) }

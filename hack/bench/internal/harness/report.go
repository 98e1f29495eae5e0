package harness

import (
	"fmt"
	"io"
	"sort"
)

// PrintWrites prints a markdown table of write attempts per task, by writer, kind and verb, and
// the events each recorder emitted. tasks is the divisor.
func PrintWrites(w io.Writer, c *Counter, tasks int) float64 {
	attempts, conflicts, events := c.Snapshot()
	fmt.Fprintln(w, "| writer (client handed to) | kind | call | attempts | per task | of which conflicts |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|")
	var total, totalConf int64
	for _, k := range SortedKeys(attempts) {
		n := attempts[k]
		total += n
		totalConf += conflicts[k]
		fmt.Fprintf(w, "| %s | %s | %s | %d | %.2f | %d |\n", k.Who, k.Kind, k.Verb, n, float64(n)/float64(tasks), conflicts[k])
	}
	perTask := float64(total) / float64(tasks)
	fmt.Fprintf(w, "| **all** | | | %d | **%.2f** | %d |\n", total, perTask, totalConf)
	if len(events) > 0 {
		names := make([]string, 0, len(events))
		var n int64
		for k, v := range events {
			names = append(names, k)
			n += v
		}
		sort.Strings(names)
		fmt.Fprintln(w)
		fmt.Fprintf(w, "Events recorded (each an events.k8s.io write by the event broadcaster, not through the clients above): %.2f per task (", float64(n)/float64(tasks))
		for i, name := range names {
			if i > 0 {
				fmt.Fprint(w, ", ")
			}
			fmt.Fprintf(w, "%s %.2f", name, float64(events[name])/float64(tasks))
		}
		fmt.Fprintln(w, ").")
	}
	return perTask
}

package harness

import (
	"fmt"
	"io"
	"sort"

	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// ReconcileStats are one controller's reconciles, from controller-runtime's metrics registry
// (in-process managers only).
type ReconcileStats struct {
	Reconciles      float64 // controller_runtime_reconcile_total, all results
	ReconcileSecs   float64 // sum of controller_runtime_reconcile_time_seconds
	QueueSecs       float64 // sum of workqueue_queue_duration_seconds
	QueueItems      float64
	RequeueAfterCnt float64 // results "requeue_after"
}

// GatherReconcileStats reads the process's controller metrics, by controller name.
func GatherReconcileStats() (map[string]*ReconcileStats, error) {
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]*ReconcileStats{}
	get := func(m *dto.Metric, name string) *ReconcileStats {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				s := out[l.GetValue()]
				if s == nil {
					s = &ReconcileStats{}
					out[l.GetValue()] = s
				}
				return s
			}
		}
		return nil
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "controller_runtime_reconcile_total":
				if s := get(m, "controller"); s != nil {
					s.Reconciles += m.GetCounter().GetValue()
					for _, l := range m.GetLabel() {
						if l.GetName() == "result" && l.GetValue() == "requeue_after" {
							s.RequeueAfterCnt += m.GetCounter().GetValue()
						}
					}
				}
			case "controller_runtime_reconcile_time_seconds":
				if s := get(m, "controller"); s != nil {
					s.ReconcileSecs += m.GetHistogram().GetSampleSum()
				}
			case "workqueue_queue_duration_seconds":
				if s := get(m, "name"); s != nil {
					s.QueueSecs += m.GetHistogram().GetSampleSum()
					s.QueueItems += float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return out, nil
}

// PrintReconcileStats prints the difference after − before per controller, per task.
func PrintReconcileStats(w io.Writer, before, after map[string]*ReconcileStats, tasks int) {
	names := make([]string, 0, len(after))
	for n := range after {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "| controller | reconciles per task | mean reconcile time | mean time queued |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, n := range names {
		a, b := after[n], before[n]
		if b == nil {
			b = &ReconcileStats{}
		}
		rec := a.Reconciles - b.Reconciles
		if rec == 0 {
			continue
		}
		q := a.QueueItems - b.QueueItems
		meanQ := 0.0
		if q > 0 {
			meanQ = (a.QueueSecs - b.QueueSecs) / q
		}
		fmt.Fprintf(w, "| %s | %.2f | %.1f ms | %.1f ms |\n", n, rec/float64(tasks), 1000*(a.ReconcileSecs-b.ReconcileSecs)/rec, 1000*meanQ)
	}
}

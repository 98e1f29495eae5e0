package controllers

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Metrics a platform team watches (config/grafana/videogen.json). Accounts are namespaces, a
// bounded set chosen by administrators, so they are safe as a label. Point movements are
// counted by the ledger itself (videogen_points_moved_total).
var (
	tasksFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "videogen_tasks_finished_total",
		Help: "Tasks that reached a terminal phase, by capability, outcome (succeeded/failed) and reason.",
	}, []string{"capability", "outcome", "reason"})
	taskDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "videogen_task_duration_seconds",
		Help:    "Time from creation to a terminal phase, by capability and outcome.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 13), // 1 s … ~68 min
	}, []string{"capability", "outcome"})
	accountPoints = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "videogen_account_points",
		Help: "An account's points as last reconciled, by state: balance, frozen, spent, credited.",
	}, []string{"namespace", "state"})
	webhookAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "videogen_task_webhook_attempts_total",
		Help: "Completion webhook attempts by outcome: delivered, retry, gone (410), refused (a literal private address: never sent), gave_up.",
	}, []string{"outcome"})
	backendErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "videogen_backend_errors_total",
		Help: "Backend calls (submit, observe) that failed and are retried, by backend and stage: the backend did not answer or answered with a transient error.",
	}, []string{"backend", "stage"})
	webhookLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "videogen_task_webhook_delivery_seconds",
		Help:    "Time from a task's completion to the delivery of its webhook.",
		Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200},
	})
)

// tasksByPhase is registered once; each manager set up in this process points it at its
// own cache (in production there is one manager; tests start several).
var tasksByPhase = &taskCounter{desc: prometheus.NewDesc("videogen_tasks",
	"Open tasks (not yet closed) by capability and phase (Pending, Queued, Running, and Succeeded or Failed while settling or delivering the webhook); finished tasks are counted by videogen_tasks_finished_total.", []string{"capability", "phase"}, nil)}

func init() {
	metrics.Registry.MustRegister(tasksFinished, taskDuration, accountPoints, webhookAttempts, webhookLatency, backendErrors, tasksByPhase)
}

func outcomeOf(p videogenv1alpha1.TaskPhase) string {
	if p == videogenv1alpha1.TaskSucceeded {
		return "succeeded"
	}
	return "failed"
}

// taskCounter exports videogen_tasks{capability, phase}: the tasks in the cache (the open ones,
// see CacheByObject), counted when Prometheus scrapes, and only by the elected manager so
// replicas do not double-count.
type taskCounter struct {
	desc    *prometheus.Desc
	mu      sync.Mutex
	reader  client.Reader
	elected <-chan struct{}
}

func (c *taskCounter) use(reader client.Reader, elected <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reader, c.elected = reader, elected
}

func (c *taskCounter) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *taskCounter) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	reader, elected := c.reader, c.elected
	c.mu.Unlock()
	if reader == nil {
		return
	}
	select {
	case <-elected:
	default:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list videogenv1alpha1.VideoTaskList
	// Read-only counting: no need to deep-copy every task out of the cache.
	if err := reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	counts := map[[2]string]float64{}
	for i := range list.Items {
		t := &list.Items[i]
		phase := string(t.Status.Phase)
		if phase == "" {
			phase = string(videogenv1alpha1.TaskPending)
		}
		counts[[2]string{string(t.Spec.Capability), phase}]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, n, k[0], k[1])
	}
}

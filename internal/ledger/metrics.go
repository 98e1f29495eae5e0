package ledger

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// pointsMoved counts every point the ledger moves, by account and operation, once the move is
// decided for good: a freeze when the hold is recorded, a deduction when its account write
// landed, a refund when the task's status says Refunded, a top-up or debit when it landed.
var pointsMoved = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "videogen_points_moved_total",
	Help: "Points moved by the ledger, by account (namespace) and operation: freeze, deduct, refund, topup, debit.",
}, []string{"namespace", "operation"})

func init() { metrics.Registry.MustRegister(pointsMoved) }

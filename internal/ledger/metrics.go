package ledger

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// pointsMoved counts every point the ledger moves, by account and operation, once per task and
// once the move is decided for good: a freeze when the hold is recorded, a deduction when its
// charge's account write landed, a refund when a hold ends without a charge (its status says
// Refunded, or it is deleted or closed first), a top-up or debit when it landed. So over a
// manager's run, freeze = deduct + refund + frozen (book.count).
var pointsMoved = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "videogen_points_moved_total",
	Help: "Points moved by the ledger, by account (namespace) and operation: freeze, deduct, refund, topup, debit.",
}, []string{"namespace", "operation"})

func init() { metrics.Registry.MustRegister(pointsMoved) }

package ledger

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// pointsMoved counts every point the ledger moves, by account and operation; counted after the
// write that moved them succeeded, in whichever process wrote (manager or apiserver).
var pointsMoved = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "videogen_points_moved_total",
	Help: "Points moved by the ledger, by account (namespace) and operation: freeze, deduct, refund, release, topup, reserve, unreserve.",
}, []string{"namespace", "operation"})

func init() { metrics.Registry.MustRegister(pointsMoved) }

func countMoves(namespace string, batch []*request, results [][]Result) {
	for i, req := range batch {
		for j, op := range req.ops {
			r := results[i][j]
			if !r.Changed || r.Err != nil {
				continue
			}
			var operation string
			switch op.kind {
			case opFreeze, opFreezeFrom:
				operation = "freeze"
			case opReserve:
				operation = "reserve"
			case opReleaseReservation:
				operation = "unreserve"
			case opSettle:
				operation = "refund"
				if r.Outcome == videogenv1alpha1.SettlementDeducted {
					operation = "deduct"
				}
			case opRelease:
				operation = "release"
			case opTopUp:
				operation = "topup"
			default:
				continue // forgetting a record moves no points
			}
			pointsMoved.WithLabelValues(namespace, operation).Add(float64(r.Amount))
		}
	}
}

package controllers_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// faults makes a manager's status writes fail: some before they reach the apiserver, some after
// (the write happened but the answer was lost), and all of them once the manager is "dead".
type faults struct {
	dead       atomic.Bool
	lostBefore atomic.Int64
	lostAfter  atomic.Int64
	rate       float64
}

func (f *faults) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if f.dead.Load() {
				f.lostBefore.Add(1)
				return errors.New("injected: manager is dead")
			}
			switch p := rand.Float64(); {
			case p < f.rate:
				f.lostBefore.Add(1)
				return errors.New("injected: connection reset before the write")
			case p < 2*f.rate:
				if err := c.SubResource(sub).Update(ctx, obj, opts...); err != nil {
					return err
				}
				f.lostAfter.Add(1)
				return errors.New("injected: connection reset after the write")
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}
}

// startFaultyManager is startManager with fault injection on every status write.
func startFaultyManager(opts controllers.Options, f *faults) (stop func()) {
	return startManager(opts, intercepted(f.funcs()))
}

var _ = Describe("Crash safety", func() {
	It("settles every task exactly once across a manager crash and lost writes", func() {
		backend := testbackend.New()
		opts := testOptions(backend)
		first := &faults{rate: 0.1}
		stopFirst := startFaultyManager(opts, first)

		credits := map[string]int64{suite.NewAccount(300): 300, suite.NewAccount(300): 300, suite.NewAccount(60): 60}
		flat := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		adjustable := aTemplate(videogenv1alpha1.CapabilityTemplate).Adjustable(5, 30, map[string]int64{"5": 15, "10": 25}).Create()

		scripts := []testbackend.Script{
			{Analyze: testbackend.Succeed, Render: testbackend.Succeed},
			{Analyze: testbackend.Succeed, Render: testbackend.Succeed},
			{Analyze: testbackend.Fail},
			{Analyze: testbackend.Succeed, Render: testbackend.Fail},
			{Analyze: testbackend.Succeed, Render: testbackend.Hang}, // times out
		}
		var names []client.ObjectKey
		for ns := range credits {
			for i := range 20 {
				b := aShortTask(ns, flat)
				if i%3 == 0 {
					b = aShortTask(ns, adjustable).Capability(videogenv1alpha1.CapabilityTemplate).Duration([]int32{5, 10, 12}[i%3+rand.IntN(2)])
				}
				s := scripts[rand.IntN(len(scripts))]
				s.Latency = time.Duration(rand.IntN(1500)) * time.Millisecond
				backend.Set(b.Name(), s)
				// Tasks that hang time out late enough to still be in flight when the manager dies,
				// however slow this machine is; the others may finish in the meantime.
				timeout := 4 * time.Second
				if s.Render == testbackend.Hang {
					timeout = 20 * time.Second
				}
				b.Timeout(timeout).Create()
				names = append(names, client.ObjectKey{Namespace: ns, Name: b.Name()})
			}
		}

		// Let some tasks finish and leave the rest mid-flight, then kill the manager: from this
		// moment none of its writes lands, whatever step it was at.
		Eventually(func() int { return countTerminal(names) }).Should(BeNumerically(">=", 5))
		first.dead.Store(true)
		stopFirst()
		Expect(countTerminal(names)).To(BeNumerically("<", len(names)), "the crash must interrupt work in flight")

		second := &faults{rate: 0.05}
		stopSecond := startFaultyManager(opts, second)
		defer stopSecond()

		Eventually(func() int { return countSettled(names) }, time.Minute).Should(Equal(len(names)))
		for ns, credited := range credits {
			var spent int64
			for _, key := range names {
				if key.Namespace != ns {
					continue
				}
				t := taskOf(ns, key.Name)
				switch {
				case t.Status.Phase == videogenv1alpha1.TaskSucceeded:
					Expect(t.Status.Charge).To(Equal(videogenv1alpha1.ChargeDeducted), key.Name)
					spent += *t.Status.Cost
				case t.Status.Cost != nil:
					Expect(t.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded), key.Name)
				default:
					Expect(t.Status.Error.Code).To(Equal("insufficient_balance"), key.Name)
				}
			}
			Eventually(func(g Gomega) {
				st := suite.AccountOf(ns).Status
				g.Expect(st.Credited).To(Equal(credited))
				g.Expect(st.Frozen).To(BeZero())
				g.Expect(st.Holds).To(BeZero())
				g.Expect(st.Spent).To(Equal(spent), "spent must equal the cost of the succeeded tasks")
				g.Expect(st.Balance).To(Equal(credited - spent))
				g.Expect(st.Journal).To(BeEmpty())
			}).Should(Succeed())
		}
		GinkgoWriter.Printf("faults: first manager lost %d writes before and %d after sending; second %d and %d\n",
			first.lostBefore.Load(), first.lostAfter.Load(), second.lostBefore.Load(), second.lostAfter.Load())
		Expect(first.lostAfter.Load()+second.lostAfter.Load()).To(BeNumerically(">", 0), "the test must exercise lost answers")
	})
})

func countTerminal(keys []client.ObjectKey) int {
	n := 0
	for _, k := range keys {
		if taskOf(k.Namespace, k.Name).Status.Phase.Terminal() {
			n++
		}
	}
	return n
}

func countSettled(keys []client.ObjectKey) int {
	n := 0
	for _, k := range keys {
		t := taskOf(k.Namespace, k.Name)
		if t.Status.Phase.Terminal() && t.Status.Charge != videogenv1alpha1.ChargeFrozen {
			n++
		}
	}
	return n
}

// Command submit measures the submission path on one hot account: POST /v1/videos/short through
// the REST apiserver (authenticate, price, ask the ledger, which admits the price in memory and
// creates the VideoTask) beside raw controller-runtime creates of the same VideoTask objects,
// at the same concurrency, in the same run, in alternating rounds. No controller runs (only the
// ledger, as the elected manager has it), so tasks stay Pending and only the submission path is
// measured; the ledger's summary writes of the account are part of it.
//
//	go run ./hack/bench/submit [-runs 5 -n1 1000 -n8 2400 -n64 3200 -rounds 2]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/videogen-dev/videogen-operator/hack/bench/internal/harness"
)

func main() {
	runs := flag.Int("runs", 5, "runs, each measuring every level")
	n1 := flag.Int("n1", 1000, "requests per run at concurrency 1 (each side)")
	n8 := flag.Int("n8", 2400, "requests per run at concurrency 8 (each side)")
	n64 := flag.Int("n64", 3200, "requests per run at concurrency 64 (each side)")
	rounds := flag.Int("rounds", 2, "alternating rounds (raw, REST) per level and run")
	limit := flag.Duration("timeout", 10*time.Minute, "stop after this long, whatever happens")
	profile := flag.String("cpuprofile", "", "write a CPU profile of this process (client, REST apiserver, ledger) here")
	flag.Parse()
	defer harness.Profile(*profile)()
	ctx, cancel := harness.Bounded(*limit)
	defer cancel()
	b := &bench{runs: *runs, rounds: *rounds, sizes: map[int]int{1: *n1, 8: *n8, 64: *n64}}
	if err := b.run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "submit:", err)
		os.Exit(1)
	}
}

var levels = []int{1, 8, 64}

type bench struct {
	runs, rounds int
	sizes        map[int]int

	env     *harness.Env
	counter *harness.Counter
	api     *harness.APIServer
	hot     harness.Account
	// results[run][c]
	results []map[int]measure
}

// measure is one level of one run: both sides, and the PointAccount writes of the REST side.
type measure struct {
	raw, rest     harness.Result
	accountWrites int64
}

func (m measure) ratio() float64 { return m.rest.Rate() / m.raw.Rate() }

func (b *bench) run(ctx context.Context) error {
	if err := b.setUp(ctx); err != nil {
		return err
	}
	defer b.env.Stop()
	for run := range b.runs {
		res := map[int]measure{}
		for _, c := range levels {
			m, err := b.level(ctx, run, c)
			if err != nil {
				return err
			}
			res[c] = m
		}
		b.results = append(b.results, res)
	}
	b.report()
	return nil
}

// setUp starts the control plane, the hot account, the ledger and the REST apiserver, and
// warms both paths up.
func (b *bench) setUp(ctx context.Context) error {
	fmt.Fprintln(os.Stderr, "starting the control plane…")
	env, err := harness.Start(ctx)
	if err != nil {
		return err
	}
	b.env = env
	if b.hot, err = env.CreateAccount(ctx, "hot", 1<<40, true); err != nil {
		return err
	}
	b.counter = harness.NewCounter()
	ledgerClient, err := env.StartLedger(ctx, b.counter)
	if err != nil {
		return err
	}
	if b.api, err = env.StartAPIServer(ctx, b.counter, 64, ledgerClient); err != nil {
		return err
	}
	if err := b.api.WaitForKeys(ctx, []harness.Account{b.hot}); err != nil {
		return err
	}
	warm := harness.Run(ctx, 200, 16, b.post)
	if err := warm.Check("warm-up"); err != nil {
		return err
	}
	return harness.Run(ctx, 200, 16, b.create).Check("raw warm-up")
}

func (b *bench) post(ctx context.Context, _ int) error {
	_, err := b.api.SubmitShort(ctx, b.hot)
	return err
}

func (b *bench) create(ctx context.Context, _ int) error {
	return b.env.Client.Create(ctx, harness.Task(b.hot.Namespace, ""))
}

// level measures one concurrency of one run in alternating rounds, so that a slow moment of
// the machine hits both sides.
func (b *bench) level(ctx context.Context, run, c int) (measure, error) {
	n := b.sizes[c]
	fmt.Fprintf(os.Stderr, "run %d, c=%d: %d raw creates and %d POSTs in %d alternating rounds…\n", run+1, c, n, n, b.rounds)
	isAccount := func(k harness.WriteKey) bool { return k.Kind == "PointAccount" }
	var m measure
	for round := range b.rounds {
		part := n / b.rounds
		if round == b.rounds-1 {
			part = n - (b.rounds-1)*part
		}
		// Raw first in even rounds, REST first in odd ones (raw, REST, REST, raw, …): the
		// control plane slows as objects pile up, and this order gives both sides the same
		// share of that drift.
		var raw, rest harness.Result
		runRaw := func() error {
			raw = harness.Run(ctx, part, c, b.create)
			return raw.Check("raw creates")
		}
		runREST := func() error {
			before := b.counter.Total(isAccount)
			rest = harness.Run(ctx, part, c, b.post)
			m.accountWrites += b.counter.Total(isAccount) - before
			return rest.Check("POST /v1/videos/short")
		}
		sides := []func() error{runRaw, runREST}
		if round%2 == 1 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return m, err
			}
		}
		m.raw, m.rest = m.raw.Merge(raw), m.rest.Merge(rest)
	}
	fmt.Fprintf(os.Stderr, "  raw %.0f/s, REST %.0f/s: %.2f\n", m.raw.Rate(), m.rest.Rate(), m.ratio())
	return m, nil
}

func (b *bench) report() {
	fmt.Println("### Submission on one hot account: `POST /v1/videos/short` beside raw VideoTask creates")
	fmt.Println()
	fmt.Println("Machine:", harness.Machine())
	fmt.Println()
	fmt.Println("| run | c | raw creates/s | raw p50 | raw p99 | REST req/s | REST p50 | REST p99 | REST ÷ raw | p99 REST ÷ raw | PointAccount writes per submission |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for run, res := range b.results {
		for _, c := range levels {
			m := res[c]
			fmt.Printf("| %d | %d | %.0f | %s | %s | %.0f | %s | %s | **%.2f** | %.2f | %.4f |\n", run+1, c,
				m.raw.Rate(), harness.Ms(m.raw.P(0.5)), harness.Ms(m.raw.P(0.99)),
				m.rest.Rate(), harness.Ms(m.rest.P(0.5)), harness.Ms(m.rest.P(0.99)), m.ratio(),
				float64(m.rest.P(0.99))/float64(m.raw.P(0.99)), float64(m.accountWrites)/float64(m.rest.N))
		}
	}
	fmt.Println()
	fmt.Printf("Requests per run and side: c=1: %d, c=8: %d, c=64: %d, in %d alternating rounds (raw, REST, REST, raw, …).\n",
		b.sizes[1], b.sizes[8], b.sizes[64], b.rounds)
	fmt.Println()
	fmt.Println("| c | REST ÷ raw, median | worst | p99 REST ÷ raw, median | worst |")
	fmt.Println("|---:|---:|---:|---:|---:|")
	met := true
	for _, c := range levels {
		var ratios, p99s []float64
		for _, res := range b.results {
			ratios = append(ratios, res[c].ratio())
			p99s = append(p99s, float64(res[c].rest.P(0.99))/float64(res[c].raw.P(0.99)))
		}
		med, worst := median(ratios), slices.Min(ratios)
		fmt.Printf("| %d | **%.2f** | %.2f | %.2f | %.2f |\n", c, med, worst, median(p99s), slices.Max(p99s))
		if med < 0.8 || worst < 0.7 || (c == 64 && median(p99s) > 2) {
			met = false
		}
	}
	fmt.Println()
	fmt.Printf("Goal: REST ≥ 0.8 of the raw create rate at c = 1, 8 and 64 (median of %d runs, none below 0.7), p99 at c = 64 within 2× of raw: **%s**.\n",
		len(b.results), map[bool]string{true: "met", false: "not met"}[met])
	fmt.Println()
	fmt.Println("Every write of the REST apiserver's and the ledger's clients over the whole run (the warm-up included):")
	fmt.Println()
	fmt.Println("| client | kind | call | attempts (conflicts) |")
	fmt.Println("|---|---|---|---:|")
	attempts, conflicts, _ := b.counter.Snapshot()
	for _, k := range harness.SortedKeys(attempts) {
		fmt.Printf("| %s | %s | %s | %d (%d) |\n", k.Who, k.Kind, k.Verb, attempts[k], conflicts[k])
	}
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

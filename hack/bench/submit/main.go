// Command submit measures the submission path: POST /v1/videos/short through the REST apiserver
// (authenticate, price, admit against the account's points, create the VideoTask) beside raw
// controller-runtime creates of the same VideoTask objects, at the same concurrency, in the
// same run. No controllers run, so tasks stay Pending and only the submission path is measured
// (with reservations, the apiserver's own writes that move each task's price into its hold
// are part of it). Each mode (reservations, a compare-and-swap per task) gets an apiserver and
// accounts of its own, and its own raw runs.
//
//	go run ./hack/bench/submit [-n1 300 -n8 1000 -n64 2000 -accounts 64 -modes reservations,per-task]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/hack/bench/internal/harness"
)

func main() {
	n1 := flag.Int("n1", 300, "requests at concurrency 1")
	n8 := flag.Int("n8", 1000, "requests at concurrency 8")
	n64 := flag.Int("n64", 2000, "requests at concurrency 64")
	accounts := flag.Int("accounts", 64, "accounts in the many-accounts scenario")
	limit := flag.Duration("timeout", 8*time.Minute, "stop after this long, whatever happens")
	profile := flag.String("cpuprofile", "", "write a CPU profile of this process (client, REST apiserver) here")
	flag.StringVar(&kubeProfile, "kube-cpuprofile", "", "write a CPU profile of the kube-apiserver over 10 s from the first c=8 REST round here")
	flag.StringVar(&kubeProfileRaw, "kube-cpuprofile-raw", "", "the same from the first c=8 raw round (to compare)")
	flag.IntVar(&rounds, "rounds", rounds, "alternating rounds (raw, REST) per level")
	flag.BoolVar(&onlyHot, "only-hot", false, "measure only the hot-account scenario")
	flag.BoolVar(&roundRequests, "round-requests", false, "print the kube-apiserver's requests and watch events of every REST round (stderr)")
	modes := flag.String("modes", "ledger", "apiserver modes to measure (one: ledger, the REST apiserver asking the elected manager's ledger)")
	flag.Parse()
	defer harness.Profile(*profile)()
	ctx, cancel := harness.Bounded(*limit)
	defer cancel()
	if err := run(ctx, map[int]int{1: *n1, 8: *n8, 64: *n64}, *accounts, strings.Split(*modes, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "submit:", err)
		os.Exit(1)
	}
}

var kubeProfile, kubeProfileRaw string

// rounds: each level alternates raw creates and POSTs this many times (-rounds).
var rounds = 4

// onlyHot skips the many-accounts scenario (-only-hot); roundRequests prints each REST
// round's kube-apiserver requests (-round-requests).
var onlyHot, roundRequests bool

type row struct {
	scenario string
	c        int
	raw, api harness.Result
	acctW    int64 // PointAccount write attempts during the REST run
	conflict int64
	reads    float64 // the kube-apiserver's GETs and LISTs during the REST rounds
	// CPU seconds all processes (kube-apiserver, etcd, this one) used during each side's rounds
	rawCPU, apiCPU float64
}

func run(ctx context.Context, sizes map[int]int, nAccounts int, modes []string) error {
	for _, m := range modes {
		if m != "ledger" {
			return fmt.Errorf("unknown mode %q (ledger)", m)
		}
	}
	fmt.Fprintln(os.Stderr, "starting the control plane…")
	env, err := harness.Start(ctx)
	if err != nil {
		return err
	}
	defer env.Stop()
	ctx, stopClients := context.WithCancel(ctx)
	defer stopClients() // before env.Stop
	fmt.Println("### Submission path: `POST /v1/videos/short` beside raw VideoTask creates")
	fmt.Println()
	fmt.Println("Machine:", harness.Machine())
	for _, mode := range modes {
		if err := runMode(ctx, env, mode, sizes, nAccounts); err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
	}
	return nil
}

func runMode(ctx context.Context, env *harness.Env, mode string, sizes map[int]int, nAccounts int) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop() // the mode's apiserver
	const balance = 1 << 40
	many, err := env.CreateAccounts(ctx, mode+"-many", nAccounts, balance, true)
	if err != nil {
		return err
	}
	hot, err := env.CreateAccount(ctx, mode+"-hot", balance, true)
	if err != nil {
		return err
	}
	// What one compare-and-swap of an account costs, below: made before the ledger starts.
	empty, err := env.CreateAccount(ctx, mode+"-empty", balance, false)
	if err != nil {
		return err
	}
	counter := harness.NewCounter()
	lc, err := env.StartLedger(ctx, counter)
	if err != nil {
		return err
	}
	api, err := env.StartAPIServer(ctx, counter, 64, lc)
	if err != nil {
		return err
	}
	all := append([]harness.Account{hot}, many...)
	if err := api.WaitForKeys(ctx, all); err != nil {
		return err
	}

	post := func(ctx context.Context, a harness.Account) error {
		_, err := api.SubmitShort(ctx, a)
		return err
	}
	create := func(ctx context.Context, a harness.Account) error {
		return env.Client.Create(ctx, harness.Task(a.Namespace, ""))
	}
	// Warm up: connections, the apiserver's informers (VideoTask, Template), both paths.
	warm := harness.Run(ctx, 4*len(all), 16, func(ctx context.Context, i int) error { return post(ctx, all[i%len(all)]) })
	if err := warm.Check("warm-up"); err != nil {
		return err
	}
	_ = harness.Run(ctx, 200, 16, func(ctx context.Context, i int) error { return create(ctx, all[i%len(all)]) })

	isAccount := func(k harness.WriteKey) bool { return k.Kind == "PointAccount" }
	var rows []row
	for _, sc := range []struct {
		name  string
		accts []harness.Account
	}{{fmt.Sprintf("%d accounts", nAccounts), many}, {"1 hot account", []harness.Account{hot}}} {
		if onlyHot && sc.accts[0] != hot {
			continue
		}
		// The last scenario's reservations are released after 2 s idle: let those writes
		// land before this scenario counts its own.
		time.Sleep(3 * time.Second)
		for _, c := range []int{1, 8, 64} {
			n := sizes[c]
			fmt.Fprintf(os.Stderr, "%s, c=%d: %d raw creates and %d POSTs in %d alternating rounds…\n", sc.name, c, n, n, rounds)
			accts := sc.accts
			// Alternating rounds, so that a slow moment of the machine hits both sides.
			var raw, apiRes harness.Result
			var reads float64          // the kube-apiserver's GETs and LISTs during the REST rounds
			var rawCPU, apiCPU float64 // CPU seconds of every process of the run during each side's rounds
			before := counter.Total(isAccount)
			_, conflictsBefore, _ := counter.Snapshot()
			for round := range rounds {
				m := n / rounds
				if round == rounds-1 {
					m = n - (rounds-1)*m
				}
				if c == 8 && kubeProfileRaw != "" {
					go profileKube(ctx, env, kubeProfileRaw)
					kubeProfileRaw = ""
				}
				cpu0 := harness.ReadCPU()
				r := harness.Run(ctx, m, c, func(ctx context.Context, i int) error { return create(ctx, accts[i%len(accts)]) })
				rawUsed := harness.ReadCPU().Sub(cpu0)
				rawCPU += rawUsed.Total()
				if err := r.Check("raw creates"); err != nil {
					return err
				}
				raw = raw.Merge(r)
				reqBefore, err := env.KubeRequests(ctx)
				if err != nil {
					return err
				}
				if c == 8 && kubeProfile != "" {
					go profileKube(ctx, env, kubeProfile)
					kubeProfile = ""
				}
				cpu0 = harness.ReadCPU()
				a := harness.Run(ctx, m, c, func(ctx context.Context, i int) error { return post(ctx, accts[i%len(accts)]) })
				apiUsed := harness.ReadCPU().Sub(cpu0)
				apiCPU += apiUsed.Total()
				fmt.Fprintf(os.Stderr, "  round %d: raw %.0f/s, REST %.0f/s (%.2f); CPU ms per request, raw / REST: %s / %s\n",
					round+1, r.Rate(), a.Rate(), a.Rate()/r.Rate(), rawUsed.PerItem(m), apiUsed.PerItem(m))
				if err := a.Check("POST /v1/videos/short"); err != nil {
					return err
				}
				reqAfter, err := env.KubeRequests(ctx)
				if err != nil {
					return err
				}
				reads += harness.Reads(reqBefore, reqAfter)
				if roundRequests {
					harness.PrintRequests(os.Stderr, reqBefore, reqAfter, m)
				}
				apiRes = apiRes.Merge(a)
			}
			_, conflictsAfter, _ := counter.Snapshot()
			var conf int64
			for k, v := range conflictsAfter {
				if isAccount(k) {
					conf += v - conflictsBefore[k]
				}
			}
			rows = append(rows, row{scenario: sc.name, c: c, raw: raw, api: apiRes, acctW: counter.Total(isAccount) - before, conflict: conf, reads: reads, rawCPU: rawCPU, apiCPU: apiCPU})
		}
	}

	// Let the apiserver's last moves and its idle release land before reading and measuring.
	time.Sleep(3 * time.Second)
	acct := &videogenv1alpha1.PointAccount{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: hot.Namespace, Name: videogenv1alpha1.PointAccountName}, acct); err != nil {
		return err
	}
	size, _ := json.Marshal(acct)
	// What one compare-and-swap costs as holds accumulate: the same status update, one at a
	// time, on an empty account and on the hot one.
	costEmpty, err := updateCost(ctx, env.Client, empty.Namespace, 30)
	if err != nil {
		return err
	}
	costHot, err := updateCost(ctx, env.Client, hot.Namespace, 30)
	if err != nil {
		return err
	}

	fmt.Println()
	fmt.Printf("#### Mode: %s\n\n", mode)
	fmt.Println("| scenario | c | raw creates/s | raw p50 | raw p99 | REST req/s | REST p50 | REST p99 | REST ÷ raw | PointAccount writes per submission (conflicts) | reads per submission | CPU ms per raw create / per REST submission |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Printf("| %s | %d | %.0f | %s | %s | %.0f | %s | %s | **%.2f** | %.3f (%d) | %.3f | %.2f / %.2f |\n",
			r.scenario, r.c, r.raw.Rate(), harness.Ms(r.raw.P(0.5)), harness.Ms(r.raw.P(0.99)),
			r.api.Rate(), harness.Ms(r.api.P(0.5)), harness.Ms(r.api.P(0.99)), r.api.Rate()/r.raw.Rate(),
			float64(r.acctW)/float64(r.api.N), r.conflict, r.reads/float64(r.api.N),
			1000*r.rawCPU/float64(r.raw.N), 1000*r.apiCPU/float64(r.api.N))
	}
	fmt.Println()
	fmt.Printf("Requests per level: c=1: %d, c=8: %d, c=64: %d, each side in %d alternating rounds (raw, REST, raw, …). "+
		"At the end the hot account holds %d holds (tasks stay Pending) and its object is %d KiB of JSON, "+
		"which every compare-and-swap on it sends whole.\n",
		sizes[1], sizes[8], sizes[64], rounds, int(acct.Status.Holds), len(size)/1024)
	fmt.Printf("\nOne PointAccount status update (get + update, c=1, 30 times): %s p50 with 0 holds, %s p50 with %d holds.\n",
		harness.Ms(costEmpty), harness.Ms(costHot), int(acct.Status.Holds))
	hotRows := rows[len(rows)-3:]
	ok := true
	for _, r := range hotRows {
		if r.api.Rate()/r.raw.Rate() < 0.8 {
			ok = false
		}
	}
	fmt.Printf("\nGoal (%s): the hot account reaches ≥ 0.8 of the raw create rate at every level: **%s** (%s).\n",
		mode, map[bool]string{true: "met", false: "not met"}[ok], ratios(hotRows))
	return nil
}

// profileKube writes a 10 s CPU profile of the kube-apiserver to path.
func profileKube(ctx context.Context, env *harness.Env, path string) {
	if err := env.KubeProfile(ctx, 10*time.Second, path); err != nil {
		fmt.Fprintln(os.Stderr, "kube-apiserver profile:", err)
	}
}

func ratios(rows []row) string {
	var parts []string
	for _, r := range rows {
		parts = append(parts, fmt.Sprintf("c=%d: %.2f", r.c, r.api.Rate()/r.raw.Rate()))
	}
	return strings.Join(parts, ", ")
}

// updateCost is the median time of a get + status update that credits one point (keeping the
// ledger's invariant), done n times in a row on one account.
func updateCost(ctx context.Context, c client.Client, ns string, n int) (time.Duration, error) {
	res := harness.Run(ctx, n, 1, func(ctx context.Context, _ int) error {
		a := &videogenv1alpha1.PointAccount{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: videogenv1alpha1.PointAccountName}, a); err != nil {
			return err
		}
		a.Status.Credited++
		a.Status.Balance++
		return c.Status().Update(ctx, a)
	})
	return res.P(0.5), res.Check("account update")
}

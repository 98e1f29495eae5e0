package harness

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Result is one load run: n calls by c workers.
type Result struct {
	N        int
	Elapsed  time.Duration
	Lat      []time.Duration // sorted
	Errors   int
	FirstErr error
}

// Run calls fn(i) for i in [0, n) from c goroutines and times every call.
func Run(ctx context.Context, n, c int, fn func(ctx context.Context, i int) error) Result {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var mu sync.Mutex
	res := Result{N: n}
	var wg sync.WaitGroup
	start := time.Now()
	for range max(1, c) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				t := time.Now()
				err := fn(ctx, i)
				lat[i] = time.Since(t)
				if err != nil {
					mu.Lock()
					res.Errors++
					if res.FirstErr == nil {
						res.FirstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	slices.Sort(lat)
	res.Lat = lat
	return res
}

// Rate is successful calls per second.
func (r Result) Rate() float64 { return float64(r.N-r.Errors) / r.Elapsed.Seconds() }

// P returns the q-quantile (0..1) of the latencies.
func (r Result) P(q float64) time.Duration { return Quantile(r.Lat, q) }

// Quantile of sorted durations (nearest rank).
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Ms formats a duration in milliseconds.
func Ms(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms >= 100:
		return fmt.Sprintf("%.0f ms", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.2f ms", ms)
}

// Check fails loudly when a run had errors: a benchmark of failing calls measures nothing.
func (r Result) Check(what string) error {
	if r.Errors > 0 {
		return fmt.Errorf("%s: %d of %d calls failed, first: %w", what, r.Errors, r.N, r.FirstErr)
	}
	return nil
}

// Merge adds another run's calls to r, as if they were one run (elapsed times add up).
func (r Result) Merge(o Result) Result {
	lat := append(append(make([]time.Duration, 0, len(r.Lat)+len(o.Lat)), r.Lat...), o.Lat...)
	slices.Sort(lat)
	out := Result{N: r.N + o.N, Elapsed: r.Elapsed + o.Elapsed, Lat: lat, Errors: r.Errors + o.Errors, FirstErr: r.FirstErr}
	if out.FirstErr == nil {
		out.FirstErr = o.FirstErr
	}
	return out
}

package overload

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	ov "github.com/deadlinebudget/budget/deadline/overload"
)

var (
	propagatedLoad = flag.Float64("overload.propagated", 0, "TestPropagatedWhole: the load to run the propagated variant at (0: the test is skipped)")
	propagatedSeed = flag.Uint64("overload.seed", 0, "TestPropagatedWhole: the model's seed (0: Seeds[0])")
)

// TestPropagatedWhole runs the whole project's row (ThisNew) alone in the
// propagated variant (seed 20261202) at -overload.propagated, printing its
// cold and steady goodput and p99 and the call errors it ended with, most
// frequent first (the limiter's refusals by cause, the retry budget's, the
// throttle's, the breaker's). It is the fast reproduction of one cell of
// cmd/compare's Scenario 10p (about a minute instead of eight), for
// comparing two commits with git worktree:
//
//	cd bench && go test ./overload -run TestPropagatedWhole -overload.propagated 10 -count 1 -v
//
// With -short the overload lasts 70 s, steady from 20 s. Each call of the
// row draws its jitter and throttle from a source seeded by the seed and
// the call's index (Policy.Rand), but the scheduler's order of the
// goroutines at one virtual instant still varies a run a little: compare
// several runs, and several seeds (-overload.seed).
func TestPropagatedWhole(t *testing.T) {
	if *propagatedLoad == 0 {
		t.Skip("-overload.propagated not given")
	}
	seed := Seeds[0]
	if *propagatedSeed != 0 {
		seed = *propagatedSeed
	}
	m := Default(seed, *propagatedLoad)
	m.Propagate = true
	if testing.Short() {
		m.Overload, m.SteadyFrom = 70*time.Second, 20*time.Second
	}
	i := slices.IndexFunc(Rows(), func(r Row) bool { return r.Name == ThisNew })
	if i < 0 {
		t.Fatalf("no row %q", ThisNew)
	}
	row := Rows()[i]
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		ends := map[string]int{}
		var trace []string
		done := make(chan struct{})
		var sampler sync.WaitGroup
		r := observed(row, func(c Caller) Caller {
			if tc, ok := c.(*thisCaller); ok && tc.lim != nil {
				sampler.Go(func() { trace = traceLimiter(tc.lim, "work", done) })
			}
			return CallerFunc(func(ctx context.Context, call Call, send Send) error {
				err := c.Call(ctx, call, send)
				k := "ok"
				if err != nil {
					// The error's kind, without the numbers that follow.
					k, _, _ = strings.Cut(err.Error(), ": position")
					k, _, _ = strings.Cut(k, "): ")
					k, _, _ = strings.Cut(k, " (balance")
				}
				mu.Lock()
				ends[k]++
				mu.Unlock()
				return err
			})
		})
		res, err := Simulate(r, m)
		close(done)
		sampler.Wait()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("%s, seed %d, %g× propagated: cold %.0f/s p99 %v, steady %.0f/s p99 %v\n", row.Name, m.Seed, m.Load,
			res.Cold.Goodput, res.Cold.P99, res.Steady.Goodput, res.Steady.P99)
		keys := slices.Sorted(maps.Keys(ends))
		slices.SortStableFunc(keys, func(a, b string) int { return ends[b] - ends[a] })
		for _, k := range keys[:min(len(keys), 12)] {
			fmt.Printf("  %8d  %s\n", ends[k], k)
		}
		fmt.Println("  the client's limiter every 10 s (mean over the 10 s; need: what the route needs nine times in ten with no queue, from its baseline):")
		for _, l := range trace {
			fmt.Println("   ", l)
		}
	})
}

// traceLimiter samples l every 100 ms until done and returns one line per
// 10 s: the mean limit, calls running and waiting, and route's need at the
// end of the 10 s (its baseline plus 1.28 standard deviations: both
// move it). It shows the propagated 10× cell's bad runs: with the
// baseline too low (seed 9, -short, before the baseline was counted at the
// top of its noise) the limit stayed at 129–215 with 125–177 calls
// waiting in the client's queue for the whole overload; since, 502–640
// with 0–6 waiting after the first 10 s (the downstream's admission queue
// holds the rest).
func traceLimiter(l *ov.Limiter, route string, done <-chan struct{}) []string {
	var lines []string
	var limit, running, waiting, n int
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return lines
		case <-tick.C:
		}
		r, w := l.Len()
		limit, running, waiting, n = limit+l.Limit(), running+r, waiting+w, n+1
		if n == 100 {
			lines = append(lines, fmt.Sprintf("%4.0fs limit %4d running %4d waiting %4d need %v", time.Since(start).Seconds(),
				limit/n, running/n, waiting/n, l.Need(route).Round(100*time.Microsecond)))
			limit, running, waiting, n = 0, 0, 0, 0
		}
	}
}

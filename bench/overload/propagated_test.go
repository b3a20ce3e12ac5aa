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
// With -short the overload lasts 70 s, steady from 20 s. The rows draw
// their jitter and throttle draws from math/rand/v2 (Policy.Rand unset),
// so one seed's cell varies from run to run: compare several runs.
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
		r := observed(row, func(c Caller) Caller {
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
	})
}

package overload

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var breakdownLoad = flag.Float64("overload.breakdown", 0, "TestLatencyBreakdown: the load to run issue 31's model at (0: the test is skipped)")

// TestLatencyBreakdown says where a good call's latency goes in this
// project's rows of issue 31's model (90 s of overload, seed 20261202, at
// -overload.breakdown): the wait before its first request went out (the
// client's Limiter queue), the start of its last attempt (retries and
// backoff), and what its last request took beyond its service time (the
// server's admission queue), for the slowest 2 % and at p50, p90 and p99.
// It is how issue 38's p99 was traced to the admission queue:
//
//	cd bench && go test ./overload -run TestLatencyBreakdown -overload.breakdown 5 -v
func TestLatencyBreakdown(t *testing.T) {
	if *breakdownLoad == 0 {
		t.Skip("-overload.breakdown not given")
	}
	m := Default(Seeds[0], *breakdownLoad)
	m.Overload, m.SteadyFrom = 90*time.Second, 30*time.Second
	for _, row := range Rows() {
		if row.Name != ThisNew && row.Name != ThisNewClient {
			continue
		}
		synctest.Test(t, func(t *testing.T) {
			// total, before the first request, before the last, the last
			// request beyond its service time, attempts
			var mu sync.Mutex
			var good [][5]time.Duration
			r := observed(row, func(c Caller) Caller {
				return CallerFunc(func(ctx context.Context, call Call, send Send) error {
					var first, last time.Time
					var took time.Duration
					n := 0
					err := c.Call(ctx, call, func(ctx context.Context) error {
						s := time.Now()
						if first.IsZero() {
							first = s
						}
						last, n = s, n+1
						err := send(ctx)
						took = time.Since(s)
						return err
					})
					if err == nil && !time.Now().After(call.Deadline) {
						mu.Lock()
						good = append(good, [5]time.Duration{time.Since(call.Start), first.Sub(call.Start), last.Sub(call.Start), took - call.Service, time.Duration(n)})
						mu.Unlock()
					}
					return err
				})
			})
			res, err := Simulate(r, m)
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(good, func(a, b [5]time.Duration) int { return int(a[0] - b[0]) })
			n := len(good)
			fmt.Printf("%s, %g×: steady %.0f/s, p99 %v, wasted %.1f%% (floor %.1f%%)\n", row.Name, m.Load,
				res.Steady.Goodput, res.Steady.P99, 100*res.Steady.Wasted, 100*res.Steady.Floor)
			var sum [5]time.Duration
			top := good[n*98/100:]
			for _, x := range top {
				for i := range sum {
					sum[i] += x[i]
				}
			}
			k := time.Duration(len(top))
			fmt.Printf("  slowest 2%%: latency %v, before the first request %v, before the last %v, the last beyond its service %v, attempts %.2f\n",
				sum[0]/k, sum[1]/k, sum[2]/k, sum[3]/k, float64(sum[4])/float64(k))
			for _, q := range []int{50, 90, 99} {
				x := good[min(n-1, n*q/100)]
				fmt.Printf("  p%d: latency %v, before the first request %v, before the last %v, the last beyond its service %v, attempts %d\n", q, x[0], x[1], x[2], x[3], x[4])
			}
		})
	}
}

// observed returns row with every Caller it builds wrapped by wrap: how the
// diagnostic tests (TestLatencyBreakdown, TestPropagatedWhole) watch one
// row's calls without changing what it does.
func observed(row Row, wrap func(Caller) Caller) Row {
	r := row
	r.New = func(env Env) (Caller, error) {
		c, err := row.New(env)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	}
	return r
}

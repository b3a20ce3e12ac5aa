package test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgeteino"
)

// BenchmarkWallClockOvershoot runs the ten-turn agent in real time on
// loopback (httptest), EINO_PAR runs at a time (default 4), each under a 300ms budget, its tool
// turning slow (2s) at a random turn and ignoring its context in half of
// the runs, and reports the overshoot past the deadline (p50, p99, max, in
// ms), the share of runs that answered with a 60ms reserve, and the stops
// that were not the typed stop. b.N runs per configuration:
//
//	go test -run '^$' -bench WallClockOvershoot -benchtime 1000x
func BenchmarkWallClockOvershoot(b *testing.B) {
	const budget = 300 * time.Millisecond
	for _, reserve := range []time.Duration{0, 60 * time.Millisecond} {
		b.Run("reserve="+reserve.String(), func(b *testing.B) {
			var mu sync.Mutex
			var over []time.Duration
			var answers, untyped int
			rnd := rand.New(rand.NewPCG(3, 4))
			sem := make(chan struct{}, par(b))
			var wg sync.WaitGroup
			b.ResetTimer()
			for i := range b.N {
				slowFrom, ignore := 1+rnd.IntN(10), i%2 == 1
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					p := &provider{Turns: 10, ToolFor: func(int) string { return "lookup" }, Latency: 2 * time.Millisecond}
					lk := &lookup{name: "lookup", latencyFor: func(n int) time.Duration {
						if n >= slowFrom {
							return 2 * time.Second
						}
						return 15 * time.Millisecond
					}}
					if ignore {
						lk.ignoreCtx = func(n int) bool { return n >= slowFrom }
					}
					srv := httptest.NewServer(p)
					defer srv.Close()
					bud := newBudget(b, reserve, func(c *otelbudgeteino.Config) {
						c.Model.AttemptTimeout = 0
					})
					a := newAgent(b, bud, p, lk, srv.URL+"/v1", &http.Transport{}, nil)
					res, took, err := a.run(context.Background(), budget)
					mu.Lock()
					defer mu.Unlock()
					over = append(over, took-budget)
					if res != nil && res.Answer != nil {
						answers++
					}
					if _, ok := errors.AsType[*deadline.StopError](err); err != nil && (!ok || !errors.Is(err, context.DeadlineExceeded)) {
						untyped++
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			slices.Sort(over)
			q := func(f float64) float64 { return float64(over[int(f*float64(len(over)-1))]) / float64(time.Millisecond) }
			b.ReportMetric(q(0.5), "p50-overshoot-ms")
			b.ReportMetric(q(0.99), "p99-overshoot-ms")
			b.ReportMetric(q(1), "max-overshoot-ms")
			b.ReportMetric(100*float64(answers)/float64(len(over)), "answered-%")
			b.ReportMetric(float64(untyped), "untyped-stops")
			time.Sleep(2100 * time.Millisecond) // abandoned tools finish
		})
	}
}

// par is how many runs the benchmark makes at a time: EINO_PAR, else 4.
func par(b *testing.B) int {
	if v := os.Getenv("EINO_PAR"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("EINO_PAR=%q: want a positive integer", v)
		}
		return n
	}
	return 4
}

package test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/deadlinebudget/budget/deadline"
)

// reserveCases are the reserve rule's cases, the same as otelbudgeteino's
// TestReserveRule: a ten-turn agent whose tool takes exactly 90 ms and
// whose model answers in 5–30 ms (seeded), 20 ms floors, under budget (or,
// with budgetMax, a budget drawn in [budget, budgetMax]: the deadline lands
// mid-run) with reserve.
var reserveCases = []struct {
	name              string
	budget, budgetMax time.Duration
	reserve           time.Duration
}{
	{name: "1s budget, 200ms reserve", budget: time.Second, reserve: 200 * time.Millisecond},
	{name: "300ms budget, 60ms reserve", budget: 300 * time.Millisecond, reserve: 60 * time.Millisecond},
	{name: "deadline mid-run, 60ms reserve", budget: 200 * time.Millisecond, budgetMax: 1100 * time.Millisecond, reserve: 60 * time.Millisecond},
}

// TestReserveRule measures, in virtual time, 200 runs per case: at least
// 99 % answer (the reserve covers one model call in every case), none
// returns after its deadline, no call starts with the floor or less left.
func TestReserveRule(t *testing.T) {
	const runs, floor = 200, 20 * time.Millisecond
	for _, rc := range reserveCases {
		t.Run(rc.name, func(t *testing.T) {
			var over []time.Duration
			answered, refusals := 0, 0
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				prov, tl := &provider{Turns: 10}, &tool{Latency: 90 * time.Millisecond}
				s := newSetup(t, ctx, memTransport{H: prov}, fakeURL, prov, tl, false)
				a := agent(t, rc.reserve, nil)
				rnd := rand.New(rand.NewPCG(35, uint64(rc.budget)))
				for range runs {
					budget := rc.budget
					if rc.budgetMax > 0 {
						budget += time.Duration(rnd.Int64N(int64(rc.budgetMax - rc.budget)))
					}
					lat := make([]time.Duration, 64)
					for i := range lat {
						lat[i] = time.Duration(5+rnd.IntN(26)) * time.Millisecond
					}
					prov.Reset()
					tl.starts = nil
					prov.LatencyOf = func(n int) time.Duration { return lat[n%len(lat)] }
					d := deadline.New(budget)
					res, err := a.Run(deadline.NewContext(ctx, d), s.g, tenTurns()...)
					over = append(over, time.Since(d.End()))
					res.WaitTools()
					if err == nil && res.Answer != nil {
						answered++
					}
					for _, st := range append(starts(prov), tl.starts...) {
						if d.End().Sub(st) <= floor {
							refusals++
						}
					}
				}
			})
			slices.Sort(over)
			p99 := over[int(0.99*float64(len(over)-1))]
			t.Logf("genkit, %s: answered %d/%d; overshoot p99 %v (max %v); calls started with <= floor left %d",
				rc.name, answered, runs, p99, over[len(over)-1], refusals)
			assert.GreaterOrEqual(t, answered, runs*99/100, "answered")
			assert.LessOrEqual(t, p99, time.Duration(0), "overshoot p99")
			assert.Zero(t, refusals, "calls started with the floor or less left")
		})
	}
}

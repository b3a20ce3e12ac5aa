package agenttest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// ReserveCase is one case of the reserve rule's measurement, the same for
// every framework: a ten-turn agent whose tools take exactly 90 ms
// (ReserveToolLatency) and whose model answers in 5–30 ms (seeded), 20 ms
// floors, under Budget (or, when BudgetMax is set, a budget drawn in
// [Budget, BudgetMax]: the deadline lands mid-run), keeping Reserve.
type ReserveCase struct {
	Name              string
	Budget, BudgetMax time.Duration
	Reserve           time.Duration
}

// ReserveCases are the cases; the reserve covers one model call in each.
var ReserveCases = []ReserveCase{
	{Name: "1s budget, 200ms reserve", Budget: time.Second, Reserve: 200 * time.Millisecond},
	{Name: "300ms budget, 60ms reserve", Budget: 300 * time.Millisecond, Reserve: 60 * time.Millisecond},
	{Name: "deadline mid-run, 60ms reserve", Budget: 200 * time.Millisecond, BudgetMax: 1100 * time.Millisecond, Reserve: 60 * time.Millisecond},
}

// The measurement's constants: runs per case, the tools' latency, the
// floors.
const (
	ReserveRuns        = 200
	ReserveToolLatency = 90 * time.Millisecond
	ReserveFloor       = 20 * time.Millisecond
)

// ReserveDraws draws the runs of case c: each run's budget and its model
// latencies (LatencyOf for the Provider), from a source seeded by the case.
func (c ReserveCase) ReserveDraws() []ReserveRun {
	rnd := rand.New(rand.NewPCG(35, uint64(c.Budget)))
	runs := make([]ReserveRun, ReserveRuns)
	for i := range runs {
		budget := c.Budget
		if c.BudgetMax > 0 {
			budget += time.Duration(rnd.Int64N(int64(c.BudgetMax - c.Budget)))
		}
		lat := make([]time.Duration, 64)
		for j := range lat {
			lat[j] = time.Duration(5+rnd.IntN(26)) * time.Millisecond
		}
		runs[i] = ReserveRun{Budget: budget, LatencyOf: func(n int) time.Duration { return lat[n%len(lat)] }}
	}
	return runs
}

// ReserveRun is one drawn run.
type ReserveRun struct {
	Budget    time.Duration
	LatencyOf func(n int) time.Duration
}

// ReserveTally adds up the runs of a case.
type ReserveTally struct {
	Answered, Refusals int
	Overshoots         []time.Duration
}

// Add records a run that ended at end with deadline at deadlineEnd,
// answered or not, its calls started at starts.
func (ta *ReserveTally) Add(deadlineEnd, end time.Time, answered bool, starts []time.Time) {
	ta.Overshoots = append(ta.Overshoots, end.Sub(deadlineEnd))
	if answered {
		ta.Answered++
	}
	for _, s := range starts {
		if deadlineEnd.Sub(s) <= ReserveFloor {
			ta.Refusals++
		}
	}
}

// P99 is the overshoot's 99th percentile.
func (ta *ReserveTally) P99() time.Duration {
	s := slices.Sorted(slices.Values(ta.Overshoots))
	return s[int(0.99*float64(len(s)-1))]
}

// String is the tally's figures.
func (ta *ReserveTally) String() string {
	return fmt.Sprintf("answered %d/%d; overshoot p99 %v (max %v); calls started with <= floor left %d",
		ta.Answered, len(ta.Overshoots), ta.P99(), slices.Max(ta.Overshoots), ta.Refusals)
}

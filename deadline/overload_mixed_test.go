package deadline_test

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/overload"
	"github.com/stretchr/testify/assert"
)

// freeTimes is a min-heap of the workers' next free instants.
type freeTimes []time.Time

func (h freeTimes) Len() int           { return len(h) }
func (h freeTimes) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h freeTimes) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *freeTimes) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *freeTimes) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// poolDownstream is n workers taking requests in arrival order, each for
// its own service time, finishing what they took.
type poolDownstream struct {
	mu         sync.Mutex
	free       freeTimes
	busy, lost time.Duration // all service given, and given to callers gone
}

func (s *poolDownstream) call(ctx context.Context, service time.Duration) error {
	now := time.Now()
	s.mu.Lock()
	start := heap.Pop(&s.free).(time.Time)
	if start.Before(now) {
		start = now
	}
	finish := start.Add(service)
	heap.Push(&s.free, finish)
	s.busy += service
	s.mu.Unlock()
	t := time.NewTimer(finish.Sub(now))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		s.lost += service
		s.mu.Unlock()
		return ctx.Err()
	}
}

// TestLimiterMixedBudgetsNoDrift: 50 workers, log-normal service times
// (median 20 ms, σ 0.5), deadlines uniform in [50 ms, 500 ms], offered 2×
// and 5× for 60 s: the adaptive limit keeps ≥ 95 % of a fixed limit of
// 50's goodput, and its limit stays within a band (no saw-tooth drift
// toward "no limit").
func TestLimiterMixedBudgetsNoDrift(t *testing.T) {
	dur := 60 * time.Second
	if testing.Short() || raceEnabled {
		dur = 20 * time.Second
	}
	run := func(t *testing.T, l *overload.Limiter, rate float64, dur time.Duration) (goodput, wasted float64, maxLimit int) {
		ds := &poolDownstream{free: make(freeTimes, 50)}
		p := deadline.DefaultPolicy()
		p.Name, p.Limiter, p.MaxAttempts = "r", l, 1
		rng := rand.New(rand.NewPCG(3, 4))
		var good atomic.Int64
		var wg sync.WaitGroup
		perTick := rate / 1000
		start := time.Now()
		for end := start.Add(dur); time.Now().Before(end); time.Sleep(time.Millisecond) {
			if time.Since(start) > 5*time.Second {
				maxLimit = max(maxLimit, l.Limit())
			}
			n, lim, prod := 0, math.Exp(-perTick), rng.Float64()
			for prod > lim {
				n++
				prod *= rng.Float64()
			}
			for range n {
				budget := 50*time.Millisecond + time.Duration(rng.Int64N(int64(450*time.Millisecond)))
				service := time.Duration(float64(20*time.Millisecond) * math.Exp(0.5*rng.NormFloat64()))
				wg.Go(func() {
					_, err := deadline.Do(context.Background(), deadline.New(budget), p, func(ctx context.Context, _ deadline.AttemptInfo) (struct{}, error) {
						return struct{}{}, ds.call(ctx, service)
					})
					if err == nil {
						good.Add(1)
					}
				})
			}
		}
		wg.Wait()
		return float64(good.Load()) / dur.Seconds(), float64(ds.lost) / float64(ds.busy), maxLimit
	}
	capacity := 50 / (0.02 * math.Exp(0.125)) // calls a second
	for _, load := range []float64{2, 5} {
		t.Run(fmt.Sprintf("%.0fx", load), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fixed, fixedWaste, _ := run(t, newLimiter(t, overload.WithFixedLimit(50)), load*capacity, dur/4)
				got, waste, maxLimit := run(t, newLimiter(t), load*capacity, dur)
				t.Logf("load %.0f×: fixed(50) %.0f/s, wasted %.1f %%; adaptive %.0f/s = %.1f %% of it, wasted %.1f %%, highest limit after 5 s %d",
					load, fixed, 100*fixedWaste, got, 100*got/fixed, 100*waste, maxLimit)
				assert.GreaterOrEqual(t, got/fixed, 0.95)
				assert.LessOrEqual(t, maxLimit, 150, "three times the workers at most")
			})
		})
	}
}

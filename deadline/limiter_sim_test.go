package deadline_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// simJob is one call's work at the simulated downstream.
type simJob struct {
	service time.Duration
	end     time.Time
	budget  time.Duration
	done    chan struct{}
}

// simResult is what one simulated run measured.
type simResult struct {
	good, sent, arrived int
	busy, wasted        time.Duration
	goodAt              []int // good calls per second
	sentBy              map[time.Duration]int
	wasteTail           time.Duration // wasted on calls whose service alone exceeded the budget
}

// simulate runs the downstream of issue 31's scenario (50 workers, a FIFO
// queue of 2 s of work, log-normal service with a Pareto tail, Poisson
// arrivals at load × capacity, budgets of 100 ms, 300 ms and 1 s) for dur
// in a synctest bubble, each call made by Do with p.
func simulate(t *testing.T, seed uint64, load float64, dur time.Duration, p func() deadline.Policy) simResult {
	var res simResult
	synctest.Test(t, func(t *testing.T) {
		const workers = 50
		rng := rand.New(rand.NewPCG(seed, 7))
		var mu sync.Mutex
		service := func() time.Duration {
			mu.Lock()
			defer mu.Unlock()
			if rng.Float64() < 0.02 {
				x := 0.3 / math.Pow(1-rng.Float64(), 1/1.2)
				return time.Duration(min(x, 5) * float64(time.Second))
			}
			return time.Duration(40e6 * math.Exp(0.5*rng.NormFloat64()))
		}
		mean := 63 * time.Millisecond
		capacity := float64(workers) / mean.Seconds()
		queue := make(chan *simJob, int(2*capacity))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		start := time.Now()
		res.goodAt = make([]int, int(dur/time.Second)+1)
		res.sentBy = map[time.Duration]int{}
		for range workers {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					case j := <-queue:
						time.Sleep(j.service)
						mu.Lock()
						res.busy += j.service
						if time.Now().After(j.end) {
							res.wasted += j.service
							if j.service > j.budget {
								res.wasteTail += j.service
							}
						}
						mu.Unlock()
						close(j.done)
					}
				}
			})
		}
		pol := p()
		op := func(ctx context.Context, _ deadline.AttemptInfo) (struct{}, error) {
			d, _ := deadline.FromContext(ctx)
			end := d.End()
			j := &simJob{service: service(), end: end, budget: d.Budget(), done: make(chan struct{})}
			select {
			case queue <- j:
			default:
				return struct{}{}, deadline.Overloaded(deadline.Retryable(errors.New("503")))
			}
			mu.Lock()
			res.sent++
			res.sentBy[j.budget]++
			mu.Unlock()
			select {
			case <-j.done:
				return struct{}{}, nil
			case <-ctx.Done():
				return struct{}{}, ctx.Err()
			}
		}
		rate := load * capacity
		var calls sync.WaitGroup
		for time.Since(start) < dur {
			mu.Lock()
			gap := time.Duration(rng.ExpFloat64() / rate * 1e9)
			u := rng.Float64()
			mu.Unlock()
			time.Sleep(gap)
			budget := time.Second
			switch {
			case u < 0.3:
				budget = 100 * time.Millisecond
			case u < 0.8:
				budget = 300 * time.Millisecond
			}
			res.arrived++
			calls.Go(func() {
				d := deadline.New(budget)
				ctx, cancel := d.Scope(deadline.NewContext(context.Background(), d))
				defer cancel()
				if _, err := deadline.Do(ctx, d, pol, op); err == nil {
					mu.Lock()
					res.good++
					res.goodAt[int(time.Since(start)/time.Second)]++
					mu.Unlock()
				}
			})
		}
		calls.Wait()
		close(stop)
		wg.Wait()
	})
	return res
}

// TestLimiterSim prints the simulated scenario's figures; run it with
// LIMITER_SIM=load (e.g. 5).
func TestLimiterSim(t *testing.T) {
	load, err := strconv.ParseFloat(os.Getenv("LIMITER_SIM"), 64)
	if err != nil {
		t.Skip("LIMITER_SIM=load runs the simulation")
	}
	capacity := 50 / 0.063
	for _, c := range []struct {
		name string
		p    func() deadline.Policy
	}{
		{"none", func() deadline.Policy { return deadline.Policy{MaxAttempts: 1} }},
		{"limiter", func() deadline.Policy {
			var opts []deadline.LimiterOption
			if v, err := strconv.Atoi(os.Getenv("LIMITER_INITIAL")); err == nil {
				opts = append(opts, deadline.WithLimitRange(1, v, 1000))
			}
			if os.Getenv("LIMITER_BREAKER") != "" {
				opts = append(opts, deadline.WithBreaker(deadline.DefaultBreaker()))
			}
			l, err := deadline.NewLimiter(opts...)
			if err != nil {
				t.Fatal(err)
			}
			p := deadline.Policy{MaxAttempts: 1, Limiter: l}
			if os.Getenv("LIMITER_THROTTLE") != "" {
				p.RetryBudget, _ = deadline.NewRetryBudget(deadline.WithThrottle(2))
				p.MaxAttempts = 3
				p.Retryable = func(err error) bool { return errors.Is(err, deadline.ErrOverloaded) }
			}
			return p
		}},
	} {
		r := simulate(t, 1, load, 20*time.Second, c.p)
		t.Logf("%-8s load %.0fx: goodput %.0f%% of capacity, wasted %.0f%% (tail %.0f%%), sent %d of %d %v, per s %v", c.name, load,
			100*float64(r.good)/20/capacity, 100*r.wasted.Seconds()/r.busy.Seconds(), 100*r.wasteTail.Seconds()/r.busy.Seconds(), r.sent, r.arrived, r.sentBy, r.goodAt)
	}
}

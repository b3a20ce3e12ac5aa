package deadline_test

import (
	"context"
	"errors"
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
	"github.com/stretchr/testify/require"
)

// fifoDownstream is a server of n workers taking requests in arrival order,
// each for a fixed service time, that finishes every request it took,
// whether its caller still waits or not: its queue is unbounded and blind
// to deadlines, the harshest downstream for a client's limit.
type fifoDownstream struct {
	mu      sync.Mutex
	service time.Duration
	free    []time.Time // each worker's next free instant, the earliest at head
	head    int
	busy    time.Duration // service given to requests whose caller had gone
	maxWait time.Duration
}

func newFIFODownstream(workers int, service time.Duration) *fifoDownstream {
	return &fifoDownstream{service: service, free: make([]time.Time, workers)}
}

// call sends one request and waits for its answer or ctx's end.
func (s *fifoDownstream) call(ctx context.Context) error {
	now := time.Now()
	s.mu.Lock()
	// Equal service times in arrival order: the worker free first is the
	// one that started first, so the ring stays sorted.
	start := s.free[s.head]
	if start.Before(now) {
		start = now
	}
	finish := start.Add(s.service)
	s.free[s.head] = finish
	s.head = (s.head + 1) % len(s.free)
	s.maxWait = max(s.maxWait, start.Sub(now))
	s.mu.Unlock()
	t := time.NewTimer(finish.Sub(now))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		s.busy += s.service // the work goes on, for nobody
		s.mu.Unlock()
		return ctx.Err()
	}
}

type simResult struct {
	offered, good, refused int64
	goodput                float64 // good calls per second
	limit                  int
	maxWait                time.Duration
}

// simulate offers rate calls a second (Poisson) for dur, each with a 100 ms
// deadline, through Do with DefaultPolicy and p's limiter, retry budget.
func simulate(t *testing.T, rate float64, dur time.Duration, l *overload.Limiter, th *overload.Throttle, seed uint64) simResult {
	t.Helper()
	ds := newFIFODownstream(10, 20*time.Millisecond)
	p := deadline.DefaultPolicy()
	p.Name = "r"
	p.Limiter, p.Throttle = l, th
	rng := rand.New(rand.NewPCG(seed, 1))
	perTick := rate / 1000
	var res simResult
	var good, refused atomic.Int64
	var wg sync.WaitGroup
	for end := time.Now().Add(dur); time.Now().Before(end); time.Sleep(time.Millisecond) {
		// Poisson arrivals within the millisecond (Knuth's method).
		n, lim, prod := 0, math.Exp(-perTick), rng.Float64()
		for prod > lim {
			n++
			prod *= rng.Float64()
		}
		for range n {
			res.offered++
			wg.Go(func() {
				d := deadline.New(100 * time.Millisecond)
				_, err := deadline.Do(context.Background(), d, p, func(ctx context.Context, _ deadline.AttemptInfo) (struct{}, error) {
					return struct{}{}, ds.call(ctx)
				})
				switch {
				case err == nil:
					good.Add(1)
				case errors.Is(err, deadline.ErrLimited) || errors.Is(err, deadline.ErrDownstreamOpen) || errors.Is(err, deadline.ErrThrottled):
					refused.Add(1)
				}
			})
		}
	}
	wg.Wait()
	res.good, res.refused = good.Load(), refused.Load()
	res.goodput = float64(res.good) / dur.Seconds()
	if l != nil {
		res.limit = l.Limit()
	}
	res.maxWait = ds.maxWait
	return res
}

// TestLimiterUniformBudgetsNoCollapse: 10 workers of 20 ms each (500 calls
// a second), every call with a 100 ms deadline, offered 1.2× to 10× of
// that for 300 s: the adaptive limit keeps ≥ 95 % of the goodput of a
// fixed limit of 10 (the workers), with and without breaker and
// throttling. Before the fix calls cut at their deadline were learned as
// latency at the deadline, the baseline rose toward it, and goodput fell
// to 0 after about 12 s.
func TestLimiterUniformBudgetsNoCollapse(t *testing.T) {
	dur := 300 * time.Second
	if testing.Short() || raceEnabled {
		dur = 30 * time.Second
	}
	for _, load := range []float64{1.2, 2, 3, 10} {
		for _, full := range []bool{false, true} {
			name := fmt.Sprintf("%.1fx/limiter", load)
			if full {
				name += "+breaker+throttle"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					rate := 500 * load
					fixed := simulate(t, rate, dur/10, newLimiter(t, overload.WithFixedLimit(10)), nil, 7)
					var opts []overload.Option
					var th *overload.Throttle
					if full {
						opts = append(opts, overload.WithBreaker())
						var err error
						th, err = overload.NewThrottle()
						require.NoError(t, err)
					}
					l := newLimiter(t, opts...)
					got := simulate(t, rate, dur, l, th, 11)
					ratio := got.goodput / fixed.goodput
					t.Logf("load %.1f×: fixed(10) %.1f/s; adaptive %.1f/s = %.1f %% of it; limit at the end %d; longest downstream wait %v; refused %d of %d",
						load, fixed.goodput, got.goodput, 100*ratio, got.limit, got.maxWait, got.refused, got.offered)
					assert.GreaterOrEqual(t, ratio, 0.95, "goodput against a fixed limit of 10")
				})
			})
		}
	}
}

// TestLimiterFollowsASlowerDownstream: the baseline rises only on evidence
// no queue of the limiter's own can give: latency that does not fall when
// the limit is halved. A downstream whose service time triples for good
// (whatever the calls in flight) gets its limit back within seconds, where
// a queue of the limiter's own (TestLimiterUniformBudgetsNoCollapse) never
// raises it.
func TestLimiterFollowsASlowerDownstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, overload.WithLimitRange(1, 40, 1000))
		var wg sync.WaitGroup
		run := func(d time.Duration, dur time.Duration) {
			for end := time.Now().Add(dur); time.Now().Before(end); time.Sleep(time.Millisecond) {
				for range 2 {
					p, ok := l.TryAcquire("r")
					if !ok {
						continue
					}
					wg.Go(func() {
						time.Sleep(d)
						p.Done(overload.OutcomeSuccess)
					})
				}
			}
		}
		run(20*time.Millisecond, 2*time.Second)
		calm := l.Limit()
		run(60*time.Millisecond, time.Second)
		low := l.Limit()
		assert.Less(t, low, calm/2, "the latency tripled: at first the limit falls")
		run(60*time.Millisecond, 9*time.Second)
		t.Logf("limit: %d at 20 ms, %d 1 s after the slowdown, %d 10 s after", calm, low, l.Limit())
		assert.GreaterOrEqual(t, l.Limit(), 100, "2 calls a millisecond of 60 ms each keep 120 in flight: the baseline followed")
		wg.Wait()
	})
}

// TestBreakerClosesForCallersNearTheServiceTime: callers whose budget is
// 1.2× a 100 ms service time carry the half-open breaker's probes, so it
// closes within 10 s of the downstream's recovery. Before, a probe needed
// twice its ceiling in budget, and the breaker stayed half-open for good.
func TestBreakerClosesForCallersNearTheServiceTime(t *testing.T) {
	for _, outage := range []time.Duration{10 * time.Second, 11300 * time.Millisecond, 12700 * time.Millisecond} {
		t.Run(outage.String(), func(t *testing.T) { breakerCloses(t, outage) })
	}
}

func breakerCloses(t *testing.T, outage time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, overload.WithBreaker())
		p := deadline.Policy{Name: "r", MaxAttempts: 1, Floor: time.Millisecond, Limiter: l}
		var failing atomic.Bool
		var wg sync.WaitGroup
		var good atomic.Int64
		call := func() {
			wg.Go(func() {
				_, err := deadline.Do(context.Background(), deadline.New(120*time.Millisecond), p,
					func(ctx context.Context, _ deadline.AttemptInfo) (struct{}, error) {
						t := time.NewTimer(100 * time.Millisecond)
						defer t.Stop()
						select {
						case <-t.C:
						case <-ctx.Done():
							return struct{}{}, ctx.Err()
						}
						if failing.Load() {
							return struct{}{}, deadline.Retryable(errors.New("500"))
						}
						return struct{}{}, nil
					})
				if err == nil {
					good.Add(1)
				}
			})
		}
		tick := func(d time.Duration, each func()) {
			for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				call()
				if each != nil {
					each()
				}
			}
		}
		tick(5*time.Second, nil)
		require.Equal(t, "closed", l.Breaker().State().String())
		failing.Store(true)
		tick(outage, nil)
		require.NotEqual(t, "closed", l.Breaker().State().String(), "the failures opened it")
		failing.Store(false)
		recovered := time.Now()
		var closedAt time.Time
		tick(30*time.Second, func() {
			if closedAt.IsZero() && l.Breaker().State() == overload.Closed {
				closedAt = time.Now()
			}
		})
		wg.Wait()
		require.False(t, closedAt.IsZero(), "the breaker never closed")
		t.Logf("closed %v after the recovery; %d good calls", closedAt.Sub(recovered), good.Load())
		assert.LessOrEqual(t, closedAt.Sub(recovered), 10*time.Second)
	})
}

// TestFastAnswersTeachNoLatency: a 1 s burst of answers given without the
// work, in 200 µs, moves the limit by at most 10 %, whether the caller
// reports them itself (Permit.Done(OutcomeAnswered)), through a Policy's
// Answered (deadlinehttp's 4xx), or as an error answer through Do (how
// deadlinegrpc's and deadlinemcp's clients see UNAUTHENTICATED or a
// JSON-RPC error).
func TestFastAnswersTeachNoLatency(t *testing.T) {
	type mode int
	const (
		direct mode = iota
		policy
		errorAnswer
	)
	for name, m := range map[string]mode{"Permit.Done": direct, "Policy.Answered": policy, "error answer": errorAnswer} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newLimiter(t, overload.WithBreaker())
				var reject atomic.Bool
				p := deadline.Policy{Name: "r", MaxAttempts: 1, Limiter: l}
				if m == policy {
					p.Answered = func(v any) bool { return v.(int) == 401 }
				}
				var wg sync.WaitGroup
				send := func(d time.Duration) {
					for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
						wg.Go(func() {
							rejected := reject.Load()
							if m == direct {
								pm, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
								if err != nil {
									return
								}
								o := overload.OutcomeSuccess
								if rejected {
									time.Sleep(200 * time.Microsecond)
									o = overload.OutcomeAnswered
								} else {
									time.Sleep(20 * time.Millisecond)
								}
								pm.Done(o)
								return
							}
							_, _ = deadline.Do(context.Background(), deadline.New(time.Second), p,
								func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
									if rejected {
										time.Sleep(200 * time.Microsecond)
										if m == errorAnswer {
											return 0, errors.New("unauthenticated")
										}
										return 401, nil
									}
									time.Sleep(20 * time.Millisecond)
									return 200, nil
								})
						})
					}
				}
				send(3 * time.Second)
				before := l.Limit()
				reject.Store(true)
				send(time.Second)
				reject.Store(false)
				send(2 * time.Second)
				wg.Wait()
				t.Logf("limit %d before the burst, %d after; breaker %s", before, l.Limit(), l.Breaker().State().String())
				assert.InDelta(t, before, l.Limit(), 0.1*float64(before))
				assert.Equal(t, "closed", l.Breaker().State().String(), "answers are no failures")
			})
		})
	}
}

package deadline_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newLimiter(t *testing.T, opts ...deadline.LimiterOption) *deadline.Limiter {
	t.Helper()
	l, err := deadline.NewLimiter(opts...)
	require.NoError(t, err)
	return l
}

func TestNewLimiterRejectsBadOptions(t *testing.T) {
	for _, c := range []struct {
		opt   deadline.LimiterOption
		field string
	}{
		{deadline.WithFixedLimit(0), "deadline.WithFixedLimit"},
		{deadline.WithLimitRange(0, 1, 2), "deadline.WithLimitRange"},
		{deadline.WithLimitRange(5, 4, 10), "deadline.WithLimitRange"},
		{deadline.WithLimitRange(1, 11, 10), "deadline.WithLimitRange"},
		{deadline.WithBacklog(-1), "deadline.WithBacklog"},
		{deadline.WithLatencyTolerance(0.9), "deadline.WithLatencyTolerance"},
		{deadline.WithLimitWindow(0), "deadline.WithLimitWindow"},
		{deadline.WithBreaker(deadline.Breaker{}), "deadline.Breaker.FailureRatio"},
		{deadline.WithBreaker(func() deadline.Breaker { b := deadline.DefaultBreaker(); b.Probes = 0; return b }()), "deadline.Breaker.Probes"},
	} {
		_, err := deadline.NewLimiter(c.opt)
		var pe *deadline.PolicyError
		require.ErrorAs(t, err, &pe, c.field)
		assert.Equal(t, c.field, pe.Field)
		assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	}
	_, err := deadline.NewLimiter(nil)
	require.NoError(t, err, "a nil option is ignored")
	err = deadline.Policy{MaxAttempts: 1, Limiter: &deadline.Limiter{}}.Validate()
	var pe *deadline.PolicyError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "Policy.Limiter", pe.Field)
}

func TestLimiterHotPath(t *testing.T) {
	l := newLimiter(t, deadline.WithFixedLimit(2), deadline.WithBacklog(0))
	a, ok := l.TryAcquire("r")
	require.True(t, ok)
	b, ok := l.TryAcquire("r")
	require.True(t, ok)
	_, ok = l.TryAcquire("r")
	require.False(t, ok, "the limit is 2")
	_, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
	var le *deadline.LimitError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, deadline.LimitQueueFull, le.Cause)
	assert.ErrorIs(t, err, deadline.ErrLimited)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "the downstream's capacity, not the budget")
	a.Done(deadline.OutcomeSuccess)
	a.Done(deadline.OutcomeSuccess) // a second Done does nothing
	running, waiting := l.Len()
	assert.Equal(t, 1, running)
	assert.Equal(t, 0, waiting)
	b.Done(deadline.OutcomeIgnore)
	var zero deadline.Permit
	zero.Done(deadline.OutcomeSuccess)
	running, _ = l.Len()
	assert.Equal(t, 0, running)
}

// TestLimiterQueueLeavesWhenItCannotFinish: a waiting call leaves at once,
// typed, when its deadline less its need passes, and is refused on arrival
// when it could not finish even from the head of the queue.
func TestLimiterQueueLeavesWhenItCannotFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, deadline.WithFixedLimit(1))
		held, ok := l.TryAcquire("r")
		require.True(t, ok)
		start := time.Now()
		_, err := l.Acquire(context.Background(), "r", start.Add(100*time.Millisecond), 30*time.Millisecond)
		var le *deadline.LimitError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, deadline.LimitQueueTimeout, le.Cause)
		assert.True(t, le.Queued)
		assert.Equal(t, 70*time.Millisecond, le.Waited, "it left as soon as 30ms were left of its 100ms")
		assert.Equal(t, 30*time.Millisecond, le.Remaining)
		assert.Equal(t, 1, le.Position)
		assert.Contains(t, le.Error(), "queue_timeout")

		_, err = l.Acquire(context.Background(), "r", time.Now().Add(10*time.Millisecond), 20*time.Millisecond)
		require.ErrorAs(t, err, &le)
		assert.Equal(t, deadline.LimitQueueTimeout, le.Cause)
		assert.False(t, le.Queued, "refused on arrival: its need exceeds its budget")
		held.Done(deadline.OutcomeSuccess)
	})
}

// TestLimiterHandsOffInOrder: FIFO while the queue empties regularly, the
// latest deadline (less twice the need) first once it has stood for
// LIFOAfter.
func TestLimiterHandsOffInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, deadline.WithFixedLimit(1), deadline.WithBacklog(10))
		held, ok := l.TryAcquire("r")
		require.True(t, ok)
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		wait := func(name string, budget, need time.Duration) {
			wg.Go(func() {
				p, err := l.Acquire(context.Background(), "r", time.Now().Add(budget), need)
				if err != nil {
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				p.Done(deadline.OutcomeSuccess)
			})
			synctest.Wait()
		}
		wait("a", 5*time.Second, 0)
		wait("b", 5*time.Second, 0)
		held.Done(deadline.OutcomeSuccess) // the queue has not stood for LIFOAfter: FIFO
		wg.Wait()
		held, ok = l.TryAcquire("r")
		require.True(t, ok)
		wait("c", 2*time.Second, 0)
		wait("d", 3*time.Second, 0)
		wait("e", 3*time.Second, time.Second) // later than c, but needs 1s: 3s-2×1s < 2s
		time.Sleep(LIFOWait)
		held.Done(deadline.OutcomeSuccess)
		wg.Wait()
		assert.Equal(t, []string{"a", "b", "d", "c", "e"}, order)
	})
}

// LIFOWait is longer than deadline.LIFOAfter.
const LIFOWait = deadline.LIFOAfter + 50*time.Millisecond

// TestLimiterAdapts: the limit falls when latency rises above the
// baseline, and grows back (within twice what is in flight) when it falls.
func TestLimiterAdapts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, deadline.WithLimitRange(1, 40, 1000))
		run := func(d time.Duration, dur time.Duration) {
			var wg sync.WaitGroup
			for end := time.Now().Add(dur); time.Now().Before(end); time.Sleep(time.Millisecond) {
				for range 2 {
					p, ok := l.TryAcquire("r")
					if !ok {
						continue
					}
					wg.Go(func() {
						time.Sleep(d)
						p.Done(deadline.OutcomeSuccess)
					})
				}
			}
			wg.Wait()
		}
		run(20*time.Millisecond, 2*time.Second)
		calm := l.Limit()
		assert.GreaterOrEqual(t, calm, 40, "2 calls a millisecond of 20ms each keep 40 in flight")
		run(100*time.Millisecond, 2*time.Second)
		assert.Less(t, l.Limit(), calm/2, "latency 5× the baseline: the limit falls")
		run(20*time.Millisecond, 3*time.Second)
		assert.GreaterOrEqual(t, l.Limit(), 40, "back to the baseline: it grows again")
		assert.LessOrEqual(t, l.Limit(), 2*calm+20)
	})
}

// TestBreakerOpensAndProbes: sustained failures open it (ErrDownstreamOpen,
// distinct from a budget refusal), a cut by the caller's deadline is no
// failure, a probe needs twice its ceiling in budget, and probes close it.
func TestBreakerOpensAndProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := deadline.Breaker{FailureRatio: 0.5, MinCalls: 4, Window: 10 * time.Second, OpenFor: time.Second, Probes: 2,
			ProbeCeiling: 100 * time.Millisecond}
		l := newLimiter(t, deadline.WithBreaker(b))
		end := func(o deadline.Outcome) {
			p, ok := l.TryAcquire("r")
			require.True(t, ok)
			p.Done(o)
		}
		for range 10 {
			end(deadline.OutcomeCut)
		}
		assert.Equal(t, "closed", l.BreakerState().String(), "cuts by the caller's deadline are no failures")
		for range 4 {
			end(deadline.OutcomeFailure)
		}
		assert.Equal(t, "open", l.BreakerState().String())
		_, ok := l.TryAcquire("r")
		assert.False(t, ok)
		_, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
		assert.ErrorIs(t, err, deadline.ErrDownstreamOpen)
		assert.NotErrorIs(t, err, deadline.ErrLimited)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)

		time.Sleep(time.Second)
		_, err = l.Acquire(context.Background(), "r", time.Now().Add(90*time.Millisecond), 0)
		assert.ErrorIs(t, err, deadline.ErrDownstreamOpen, "90ms cannot hold a 100ms probe")
		assert.Equal(t, "half_open", l.BreakerState().String())
		p1, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
		require.NoError(t, err)
		assert.True(t, p1.Probe)
		assert.Equal(t, 100*time.Millisecond, p1.Ceiling)
		p2, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
		require.NoError(t, err)
		_, err = l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
		assert.ErrorIs(t, err, deadline.ErrDownstreamOpen, "two probes at most")
		p1.Done(deadline.OutcomeSuccess)
		p2.Done(deadline.OutcomeSuccess)
		assert.Equal(t, "closed", l.BreakerState().String())

		for range 4 {
			end(deadline.OutcomeFailure)
		}
		time.Sleep(time.Second)
		p, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
		require.NoError(t, err)
		p.Done(deadline.OutcomeFailure)
		assert.Equal(t, "open", l.BreakerState().String(), "a failed probe opens it again")
	})
}

// TestDoWithLimiter: Policy.Limiter's refusals stop Do with their own
// reasons, sentinels and verdicts, and a probe runs under its ceiling.
func TestDoWithLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, deadline.WithFixedLimit(1), deadline.WithBacklog(0))
		held, ok := l.TryAcquire("fetch")
		require.True(t, ok)
		var res deadline.CallResult
		p := deadline.Policy{Name: "fetch", MaxAttempts: 1, Limiter: l,
			Hooks: &deadline.Hooks{CallEnd: func(_ context.Context, r deadline.CallResult) { res = r }}}
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, ok2)
		se := stopErr(err)
		assert.Equal(t, deadline.ReasonLimited, se.Reason)
		assert.ErrorIs(t, err, deadline.ErrLimited)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
		require.NotNil(t, se.Refusal)
		assert.Equal(t, deadline.LimitQueueFull, se.Refusal.Cause)
		assert.Equal(t, 1, se.Refusal.Limit)
		assert.Equal(t, deadline.VerdictOverloaded, deadline.VerdictOf(res))
		assert.Same(t, se.Refusal, res.Refusal)
		assert.Contains(t, err.Error(), "fetch: limited before attempt 1 (queue_full)")
		held.Done(deadline.OutcomeSuccess)

		v, err := deadline.Do(context.Background(), deadline.New(time.Second), p, ok2)
		require.NoError(t, err)
		assert.Equal(t, "ok", v)
		running, _ := l.Len()
		assert.Equal(t, 0, running, "Do frees its slot")

		b := deadline.Breaker{FailureRatio: 1, MinCalls: 1, Window: time.Second, OpenFor: time.Second, Probes: 1, ProbeCeiling: 50 * time.Millisecond}
		bl := newLimiter(t, deadline.WithBreaker(b))
		p.Limiter = bl
		p.Retryable = func(error) bool { return true }
		_, err = deadline.Do(context.Background(), deadline.New(time.Second), p, func(context.Context, deadline.AttemptInfo) (string, error) {
			return "", errFlaky
		})
		require.Error(t, err)
		_, err = deadline.Do(context.Background(), deadline.New(time.Second), p, ok2)
		assert.ErrorIs(t, err, deadline.ErrDownstreamOpen)
		assert.Equal(t, deadline.ReasonOpen, stopErr(err).Reason)
		assert.Equal(t, deadline.VerdictOpen, deadline.VerdictOf(res))
		time.Sleep(time.Second)
		var granted time.Duration
		_, err = deadline.Do(context.Background(), deadline.New(time.Second), p, func(_ context.Context, a deadline.AttemptInfo) (string, error) {
			granted = a.Granted
			return "ok", nil
		})
		require.NoError(t, err)
		assert.Equal(t, 50*time.Millisecond, granted, "the probe runs under its ceiling")
		assert.Equal(t, "closed", bl.BreakerState().String())
	})
}

func ok2(context.Context, deadline.AttemptInfo) (string, error) { return "ok", nil }

// TestThrottle: once the downstream refuses most attempts, client-side
// throttling drops attempts before they go out, with its own reason; it
// counts in the retry budget's window, so it forgets with it.
func TestThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, deadline.WithThrottle(2), deadline.WithRetryWindow(time.Second))
		assert.Equal(t, 2.0, b.Throttle())
		p := deadline.Policy{MaxAttempts: 1, RetryBudget: b, Rand: func(n int64) int64 { return n / 2 }} // draws 0.5
		overloaded := func(context.Context, deadline.AttemptInfo) (string, error) {
			return "", deadline.Overloaded(errors.New("503"))
		}
		sent := 0
		for range 100 {
			_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (string, error) {
				sent++
				return overloaded(ctx, a)
			})
			require.Error(t, err)
			if errors.Is(err, deadline.ErrThrottled) {
				assert.Equal(t, deadline.ReasonThrottled, stopErr(err).Reason)
				assert.NotErrorIs(t, err, context.DeadlineExceeded)
			}
		}
		assert.Less(t, sent, 10, "dropped once (requests − 2×accepts)/(requests+1) exceeds one half")
		assert.Greater(t, b.DropProbability(), 0.5)
		time.Sleep(2 * time.Second)
		assert.Zero(t, b.DropProbability(), "the window forgot")
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, ok2)
		require.NoError(t, err)

		_, err = deadline.NewRetryBudget(deadline.WithThrottle(0.5))
		var pe *deadline.PolicyError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "deadline.WithThrottle", pe.Field)
		off := newBudget(t)
		assert.Zero(t, off.DropProbability())
	})
}

func TestOverloadedMarks(t *testing.T) {
	assert.NoError(t, deadline.Overloaded(nil))
	base := deadline.Retryable(errFlaky)
	err := deadline.Overloaded(base)
	assert.ErrorIs(t, err, deadline.ErrOverloaded)
	assert.ErrorIs(t, err, errFlaky)
	assert.True(t, deadline.IsRetryable(err))
	assert.Equal(t, base.Error(), err.Error())
	for _, c := range []deadline.LimitCause{deadline.LimitNone, deadline.LimitQueueFull, deadline.LimitQueueTimeout, deadline.LimitOpen, deadline.LimitThrottled, deadline.LimitStandingQueue, 99} {
		assert.NotEmpty(t, c.String())
	}
	assert.Equal(t, "standing_queue", deadline.LimitStandingQueue.String())
	assert.Equal(t, deadline.ReasonLimited, deadline.LimitStandingQueue.Reason())
	assert.Equal(t, "limited", deadline.ReasonLimited.String())
	assert.Equal(t, "downstream_open", deadline.ReasonOpen.String())
	assert.Equal(t, "throttled", deadline.ReasonThrottled.String())
	assert.False(t, deadline.ReasonLimited.Budget())
}

// TestLimiterConcurrent hammers the hot path and the queue from many
// goroutines: the limit is never exceeded and every slot comes back.
func TestLimiterConcurrent(t *testing.T) {
	l := newLimiter(t, deadline.WithFixedLimit(4), deadline.WithBacklog(64))
	var mu sync.Mutex
	inflight, most := 0, 0
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 200 {
				p, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
				if err != nil {
					continue
				}
				mu.Lock()
				inflight++
				most = max(most, inflight)
				mu.Unlock()
				mu.Lock()
				inflight--
				mu.Unlock()
				p.Done(deadline.OutcomeSuccess)
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, most, 4)
	running, waiting := l.Len()
	assert.Zero(t, running)
	assert.Zero(t, waiting)
}

// BenchmarkLimiterAdmit is the admission check on the hot path: a free
// slot, nobody waiting, the breaker closed (issue 31's goal: <= 50 ns, 0
// allocations).
func BenchmarkLimiterAdmit(b *testing.B) {
	// A limit no run reaches, so that the check is measured alone (the
	// slots are never freed); the breaker is checked too.
	l, err := deadline.NewLimiter(deadline.WithFixedLimit(math.MaxInt32), deadline.WithBreaker(deadline.DefaultBreaker()))
	require.NoError(b, err)
	b.ReportAllocs()
	// Also in CPU time of the thread (cpu-ns/op): on a shared machine the
	// wall clock counts the time other processes held the CPU.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const block = 1024
	var cpu time.Duration
	n := 0
	for b.Loop() {
		t0 := threadCPU()
		for range block {
			p, ok := l.TryAcquire("r")
			if !ok {
				b.Fatal("refused")
			}
			permitSink = p
		}
		cpu += threadCPU() - t0
		n++
	}
	b.ReportMetric(float64(cpu)/float64(n*block), "cpu-ns/op")
	b.ReportMetric(float64(b.Elapsed())/float64(n*block), "wall-ns/op")
}

var permitSink deadline.Permit

// BenchmarkLimiterAdmitRelease is a call's whole hold on a fixed limit
// (admission's Queue): the check and Done.
func BenchmarkLimiterAdmitRelease(b *testing.B) {
	l, err := deadline.NewLimiter(deadline.WithFixedLimit(64))
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		p, _ := l.TryAcquire("r")
		p.Done(deadline.OutcomeSuccess)
	}
}

// BenchmarkLimiterAdaptiveRelease is the same on the adaptive limit, whose
// Done learns the latency under the limiter's lock.
func BenchmarkLimiterAdaptiveRelease(b *testing.B) {
	l, err := deadline.NewLimiter()
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		p, _ := l.TryAcquire("r")
		p.Done(deadline.OutcomeSuccess)
	}
}

// BenchmarkLimiterAdmitParallel is the check from every CPU at once.
func BenchmarkLimiterAdmitParallel(b *testing.B) {
	l, err := deadline.NewLimiter(deadline.WithFixedLimit(1 << 20))
	require.NoError(b, err)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, _ := l.TryAcquire("r")
			p.Done(deadline.OutcomeSuccess)
		}
	})
}

// TestBreakerProbesWithoutANeed: with nothing known of what a call needs
// (no need, no latency, no ProbeCeiling), a probe runs without a ceiling
// rather than never: the breaker can close.
func TestBreakerProbesWithoutANeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := deadline.Breaker{FailureRatio: 1, MinCalls: 1, Window: time.Second, OpenFor: time.Second, Probes: 1}
		l := newLimiter(t, deadline.WithFixedLimit(4), deadline.WithBreaker(b))
		p, ok := l.TryAcquire("r")
		require.True(t, ok)
		p.Done(deadline.OutcomeFailure)
		assert.Equal(t, "open", l.BreakerState().String())
		time.Sleep(time.Second)
		var granted time.Duration
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), deadline.Policy{MaxAttempts: 1, Limiter: l},
			func(_ context.Context, a deadline.AttemptInfo) (string, error) {
				granted = a.Granted
				return "ok", nil
			})
		require.NoError(t, err)
		assert.Equal(t, time.Second, granted, "no ceiling of its own")
		assert.Equal(t, "closed", l.BreakerState().String())
	})
}

// FuzzLimiterConfig: any configuration is either accepted, and then the
// limiter admits and frees a call, or refused with a PolicyError naming the
// option; nothing panics.
func FuzzLimiterConfig(f *testing.F) {
	f.Add(1, 20, 1000, 10, 1.25, int64(100*time.Millisecond), 0.5, 20, 3)
	f.Add(0, 0, 0, -1, 0.5, int64(0), 2.0, 0, 0)
	f.Fuzz(func(t *testing.T, lo, initial, hi, backlog int, tol float64, window int64, ratio float64, minCalls, probes int) {
		b := deadline.DefaultBreaker()
		b.FailureRatio, b.MinCalls, b.Probes = ratio, minCalls, probes
		l, err := deadline.NewLimiter(deadline.WithLimitRange(lo, initial, hi), deadline.WithBacklog(backlog),
			deadline.WithLatencyTolerance(tol), deadline.WithLimitWindow(time.Duration(window)), deadline.WithBreaker(b))
		if err != nil {
			var pe *deadline.PolicyError
			require.ErrorAs(t, err, &pe)
			require.NotEmpty(t, pe.Field)
			require.NotEmpty(t, pe.Allowed)
			return
		}
		p, ok := l.TryAcquire("r")
		require.True(t, ok, "a valid limiter admits its first call")
		p.Done(deadline.OutcomeSuccess)
		running, _ := l.Len()
		require.Zero(t, running)
	})
}

// TestLimiterErrorAnswersDoNotTeachLatency is the regression test of the
// collapse the overload bench found (two routes behind the server's
// admission): a downstream that refuses a burst of calls at once (its own
// refusal, an overload answer) must not teach the route's latency. It once
// did: the route's baseline fell to the refusals' latency (nothing), every
// real call after them looked queued a thousandfold, the limit was halved
// every window, and the baseline, which rises 1 % a window, took minutes to
// come back, with the limit at a handful of calls meanwhile.
func TestLimiterErrorAnswersDoNotTeachLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t)
		errRefused := errors.New("refused by the downstream's admission")
		var refuse bool
		var mu sync.Mutex
		p := deadline.Policy{Name: "slow", MaxAttempts: 1, Limiter: l}
		op := func(ctx context.Context, _ deadline.AttemptInfo) (string, error) {
			mu.Lock()
			r := refuse
			mu.Unlock()
			if r {
				if time.Now().UnixNano()/int64(time.Millisecond)%2 == 0 {
					return "", errRefused // an error of its own: not retryable
				}
				return "", deadline.Overloaded(errRefused)
			}
			select {
			case <-time.After(200 * time.Millisecond):
				return "ok", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		// 200 calls a second of 200ms: 40 in flight.
		run := func(dur time.Duration) (good int) {
			var wg sync.WaitGroup
			var gmu sync.Mutex
			for end := time.Now().Add(dur); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				wg.Go(func() {
					if _, err := deadline.Do(context.Background(), deadline.New(time.Second), p, op); err == nil {
						gmu.Lock()
						good++
						gmu.Unlock()
					}
				})
			}
			wg.Wait()
			return good
		}
		run(3 * time.Second)
		require.GreaterOrEqual(t, l.Limit(), 40, "the limit follows the demand")
		mu.Lock()
		refuse = true
		mu.Unlock()
		run(time.Second)
		mu.Lock()
		refuse = false
		mu.Unlock()
		run(time.Second) // the limit may adjust; it must not collapse
		good := run(2 * time.Second)
		assert.GreaterOrEqual(t, l.Limit(), 40, "refusals answered at once say nothing of the route's latency")
		assert.Greater(t, good, 350, "400 calls of which nearly all are served")
	})
}

// BenchmarkLimiterPlaceDeepQueue measures how a newcomer is placed in a
// queue of n waiting calls in the overloaded order (the calls served before
// it counted, for the wait its place implies): admission's backlog at 10×
// overload holds about 1 600. The newcomer's context has ended, so it is
// refused once placed and the queue stays as it is.
func BenchmarkLimiterPlaceDeepQueue(b *testing.B) {
	for _, n := range []int{16, 1600, 16000} {
		b.Run(fmt.Sprintf("waiting=%d", n), func(b *testing.B) {
			l, err := deadline.NewLimiter(deadline.WithFixedLimit(1), deadline.WithBacklog(n+1))
			require.NoError(b, err)
			held, ok := l.TryAcquire("r")
			require.True(b, ok)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			now := time.Now()
			rng := rand.New(rand.NewPCG(1, 2))
			for range n {
				end := now.Add(time.Minute + time.Duration(rng.Int64N(int64(time.Minute))))
				wg.Go(func() { _, _ = l.Acquire(ctx, "r", end, 0) })
			}
			for {
				if _, w := l.Len(); w == n {
					break
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(deadline.LIFOAfter + 10*time.Millisecond) // the overloaded order
			gone, stop := context.WithCancel(context.Background())
			stop()
			ends := make([]time.Time, 1024)
			for i := range ends {
				ends[i] = now.Add(time.Minute + time.Duration(rng.Int64N(int64(time.Minute))))
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := l.Acquire(gone, "r", ends[i%len(ends)], 0); err == nil {
					b.Fatal("placed a call whose context had ended")
				}
				i++
			}
			b.StopTimer()
			cancel()
			wg.Wait()
			held.Done(deadline.OutcomeSuccess)
		})
	}
}

// TestLimiterEvictsTheLastServed: a full backlog under the overloaded
// order refuses the call it would serve last, never the one it would serve
// first, and says where that call stood. Before, it evicted the oldest
// waiting call: a 1 s call with 850 ms left made room for a 100 ms call,
// which then timed out, and nothing was served.
func TestLimiterEvictsTheLastServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, deadline.WithFixedLimit(1), deadline.WithBacklog(1))
		held, ok := l.TryAcquire("r")
		require.True(t, ok)
		type result struct {
			p   deadline.Permit
			err error
		}
		long := make(chan result, 1)
		go func() {
			p, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 10*time.Millisecond)
			long <- result{p, err}
		}()
		synctest.Wait()
		time.Sleep(150 * time.Millisecond) // a standing queue: the overloaded order
		_, err := l.Acquire(context.Background(), "r", time.Now().Add(100*time.Millisecond), 10*time.Millisecond)
		var le *deadline.LimitError
		require.ErrorAs(t, err, &le, "the newcomer would be served after the 1 s call: it is the one refused")
		assert.Equal(t, deadline.LimitQueueFull, le.Cause)
		assert.Equal(t, 2, le.Position, "behind the 1 s call")
		held.Done(deadline.OutcomeSuccess)
		r := <-long
		require.NoError(t, r.err, "the call served first keeps its place")
		r.p.Done(deadline.OutcomeSuccess)

		// The other way round: a newcomer served first evicts the waiting
		// call served last, which learns where it stood.
		held, ok = l.TryAcquire("r")
		require.True(t, ok)
		short := make(chan result, 1)
		go func() {
			p, err := l.Acquire(context.Background(), "r", time.Now().Add(400*time.Millisecond), 10*time.Millisecond)
			short <- result{p, err}
		}()
		synctest.Wait()
		time.Sleep(150 * time.Millisecond)
		newer := make(chan result, 1)
		go func() {
			p, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 10*time.Millisecond)
			newer <- result{p, err}
		}()
		r = <-short
		require.ErrorAs(t, r.err, &le)
		assert.Equal(t, deadline.LimitQueueFull, le.Cause)
		assert.True(t, le.Queued)
		assert.Equal(t, 2, le.Position, "evicted from behind the newcomer, beyond the backlog of 1")
		held.Done(deadline.OutcomeSuccess)
		r = <-newer
		require.NoError(t, r.err)
		r.p.Done(deadline.OutcomeSuccess)
	})
}

// TestLimiterRejectsANegativeNeed: a negative need is bad input, said at
// once, not a wait past the deadline (it once waited an hour).
func TestLimiterRejectsANegativeNeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, deadline.WithFixedLimit(1))
		held, ok := l.TryAcquire("r")
		require.True(t, ok)
		start := time.Now()
		_, err := l.Acquire(context.Background(), "r", start.Add(100*time.Millisecond), -time.Hour)
		var pe *deadline.PolicyError
		require.ErrorAs(t, err, &pe)
		assert.Contains(t, pe.Error(), "need")
		assert.Zero(t, time.Since(start), "refused at once")
		held.Done(deadline.OutcomeSuccess)
		running, waiting := l.Len()
		assert.Zero(t, running+waiting)
	})
}

// TestPermitCopiesFreeOnce: a Permit is a value; whichever copy is Done
// first frees the slot, and the others do nothing. Before, q := p;
// p.Done(); q.Done() left running at −1 and let two extra calls in.
func TestPermitCopiesFreeOnce(t *testing.T) {
	l := newLimiter(t, deadline.WithFixedLimit(1), deadline.WithBacklog(0))
	p, ok := l.TryAcquire("r")
	require.True(t, ok)
	q := p
	p.Done(deadline.OutcomeSuccess)
	q.Done(deadline.OutcomeSuccess)
	running, _ := l.Len()
	assert.Zero(t, running)
	a, ok := l.TryAcquire("r")
	require.True(t, ok)
	_, ok = l.TryAcquire("r")
	assert.False(t, ok, "the limit of 1 holds")
	q.Done(deadline.OutcomeSuccess) // a stale copy, its slot now another's
	running, _ = l.Len()
	assert.Equal(t, 1, running, "a's slot stays taken")
	c := a
	c.Done(deadline.OutcomeSuccess) // a copy of the holder frees it, once
	a.Done(deadline.OutcomeSuccess)
	running, _ = l.Len()
	assert.Zero(t, running)

	// Many held at once and copied, on an adaptive limiter.
	al := newLimiter(t)
	var held []deadline.Permit
	for range 10 {
		p, ok := al.TryAcquire("r")
		require.True(t, ok)
		held = append(held, p, p)
	}
	for i := range held {
		held[i].Done(deadline.OutcomeIgnore)
	}
	running, _ = al.Len()
	assert.Zero(t, running)
}

// TestLimiterStandingWait checks CoDel's bound in a queue ordered by
// arrival: once the queue has stood for LIFOAfter, a call waits at most
// StandingWaitNeeds × its need and is refused with LimitStandingQueue,
// its budget mostly left; a client's queue, ordered by its own deadlines,
// lets it wait while it can still finish.
func TestLimiterStandingWait(t *testing.T) {
	for _, tt := range []struct {
		name    string
		arrival bool
		cause   deadline.LimitCause
		waited  time.Duration
	}{
		{"arrival order: bounded", true, deadline.LimitStandingQueue, deadline.LIFOAfter + deadline.StandingWaitNeeds*20*time.Millisecond},
		{"deadline order: until it cannot finish", false, deadline.LimitQueueTimeout, time.Second - 20*time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := []deadline.LimiterOption{deadline.WithFixedLimit(1), deadline.WithBacklog(5)}
				if tt.arrival {
					opts = append(opts, deadline.WithArrivalOrder())
				}
				l := newLimiter(t, opts...)
				holder, err := l.Acquire(t.Context(), "r", time.Time{}, 0)
				require.NoError(t, err)
				start := time.Now()
				_, err = l.Acquire(t.Context(), "r", start.Add(time.Second), 20*time.Millisecond)
				var le *deadline.LimitError
				require.ErrorAs(t, err, &le)
				assert.ErrorIs(t, err, deadline.ErrLimited)
				assert.Equal(t, tt.cause, le.Cause)
				assert.True(t, le.Queued)
				assert.Equal(t, tt.waited, le.Waited)
				assert.Equal(t, time.Since(start), le.Waited)
				assert.Contains(t, err.Error(), tt.cause.String())
				holder.Done(deadline.OutcomeSuccess)
				_, waiting := l.Len()
				assert.Zero(t, waiting)
			})
		})
	}
}

// TestLimiterStandingWaitFollowsTheMeanLatency: with an adaptive limit
// in arrival order (a server's), a cheap call in a standing queue waits
// twice the limiter's mean latency when that is longer than its own need:
// the slots turn over at the pace of the costly calls.
func TestLimiterStandingWaitFollowsTheMeanLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, deadline.WithLimitRange(1, 1, 1), deadline.WithBacklog(5), deadline.WithArrivalOrder())
		p, err := l.Acquire(t.Context(), "slow", time.Time{}, 0)
		require.NoError(t, err)
		time.Sleep(100 * time.Millisecond)
		p.Done(deadline.OutcomeSuccess) // the mean latency: 100 ms
		holder, err := l.Acquire(t.Context(), "slow", time.Time{}, 0)
		require.NoError(t, err)
		_, err = l.Acquire(t.Context(), "fast", time.Now().Add(time.Second), 2*time.Millisecond)
		var le *deadline.LimitError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, deadline.LimitStandingQueue, le.Cause)
		assert.Equal(t, deadline.LIFOAfter+deadline.StandingWaitNeeds*100*time.Millisecond, le.Waited)
		holder.Done(deadline.OutcomeSuccess)
	})
}

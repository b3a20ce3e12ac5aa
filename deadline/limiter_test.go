package deadline_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/overload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newLimiter(t *testing.T, opts ...overload.Option) *overload.Limiter {
	t.Helper()
	l, err := overload.NewLimiter(opts...)
	require.NoError(t, err)
	return l
}

// TestDoWithLimiter: Policy.Limiter's refusals stop Do with their own
// reasons, sentinels and verdicts, and a probe runs under its ceiling.
func TestDoWithLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, overload.WithFixedLimit(1), overload.WithBacklog(0))
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
		assert.Equal(t, overload.CauseQueueFull, se.Refusal.Cause)
		assert.Equal(t, 1, se.Refusal.Limit)
		assert.Equal(t, deadline.VerdictOverloaded, deadline.VerdictOf(res))
		assert.Same(t, se.Refusal, res.Refusal)
		assert.Contains(t, err.Error(), "fetch: limited before attempt 1 (queue_full)")
		held.Done(overload.OutcomeSuccess)

		v, err := deadline.Do(context.Background(), deadline.New(time.Second), p, ok2)
		require.NoError(t, err)
		assert.Equal(t, "ok", v)
		running, _ := l.Len()
		assert.Equal(t, 0, running, "Do frees its slot")

		b := []overload.BreakerOption{overload.WithFailureRatio(1, 1), overload.WithFailureWindow(time.Second), overload.WithOpenFor(time.Second), overload.WithProbes(1, 50*time.Millisecond)}
		bl := newLimiter(t, overload.WithBreaker(b...))
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
		assert.Equal(t, "closed", bl.Breaker().State().String())
	})
}

func ok2(context.Context, deadline.AttemptInfo) (string, error) { return "ok", nil }

// TestThrottle: once the downstream refuses most attempts, Policy.Throttle
// drops attempts before they go out, with its own reason, and the refusal
// itself matches the same sentinel; it forgets with its window.
func TestThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, err := overload.NewThrottle(overload.WithThrottleK(2), overload.WithThrottleWindow(time.Second))
		require.NoError(t, err)
		assert.Equal(t, 2.0, th.K())
		p := deadline.Policy{MaxAttempts: 1, Throttle: th, Rand: func(n int64) int64 { return n / 2 }} // draws 0.5
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
				se := stopErr(err)
				assert.Equal(t, deadline.ReasonThrottled, se.Reason)
				assert.NotErrorIs(t, err, context.DeadlineExceeded)
				require.NotNil(t, se.Refusal)
				assert.ErrorIs(t, se.Refusal, deadline.ErrThrottled)
				assert.ErrorIs(t, se.Refusal, overload.ErrThrottled)
				assert.Equal(t, "throttled", se.Refusal.ErrorType())
			}
		}
		assert.Less(t, sent, 10, "dropped once (requests − 2×accepts)/(requests+1) exceeds one half")
		assert.Greater(t, th.DropProbability(), 0.5)
		time.Sleep(2 * time.Second)
		assert.Zero(t, th.DropProbability(), "the window forgot")
		_, err = deadline.Do(context.Background(), deadline.New(time.Second), p, ok2)
		require.NoError(t, err)

		err = deadline.Policy{MaxAttempts: 1, Throttle: &overload.Throttle{}}.Validate()
		var pe *deadline.PolicyError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "Policy.Throttle", pe.Field)
		err = deadline.Policy{MaxAttempts: 1, Limiter: &overload.Limiter{}}.Validate()
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "Policy.Limiter", pe.Field)
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
	for _, c := range []overload.Cause{overload.CauseNone, overload.CauseQueueFull, overload.CauseQueueTimeout, overload.CauseOpen, overload.CauseThrottled, overload.CauseStandingQueue, 99} {
		assert.NotEmpty(t, c.String())
	}
	assert.Equal(t, "standing_queue", overload.CauseStandingQueue.String())
	assert.Equal(t, deadline.ErrLimited, overload.CauseStandingQueue.Sentinel())
	assert.Equal(t, "limited", deadline.ReasonLimited.String())
	assert.Equal(t, "downstream_open", deadline.ReasonOpen.String())
	assert.Equal(t, "throttled", deadline.ReasonThrottled.String())
	assert.False(t, deadline.ReasonLimited.Budget())
}

// TestBreakerProbesWithoutANeed: with nothing known of what a call needs
// (no need, no latency, no ProbeCeiling), a probe runs without a ceiling
// rather than never: the breaker can close.
func TestBreakerProbesWithoutANeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := []overload.BreakerOption{overload.WithFailureRatio(1, 1), overload.WithFailureWindow(time.Second), overload.WithOpenFor(time.Second), overload.WithProbes(1, 0)}
		l := newLimiter(t, overload.WithFixedLimit(4), overload.WithBreaker(b...))
		p, ok := l.TryAcquire("r")
		require.True(t, ok)
		p.Done(overload.OutcomeFailure)
		assert.Equal(t, "open", l.Breaker().State().String())
		time.Sleep(time.Second)
		var granted time.Duration
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), deadline.Policy{MaxAttempts: 1, Limiter: l},
			func(_ context.Context, a deadline.AttemptInfo) (string, error) {
				granted = a.Granted
				return "ok", nil
			})
		require.NoError(t, err)
		assert.Equal(t, time.Second, granted, "no ceiling of its own")
		assert.Equal(t, "closed", l.Breaker().State().String())
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

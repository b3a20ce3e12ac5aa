package deadline_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newBudget builds a retry budget or fails the test.
func newBudget(t *testing.T, opts ...deadline.RetryBudgetOption) *deadline.RetryBudget {
	t.Helper()
	b, err := deadline.NewRetryBudget(opts...)
	require.NoError(t, err)
	return b
}

// firstAttempts deposits n first attempts by running n calls that succeed.
func firstAttempts(t *testing.T, b *deadline.RetryBudget, n int) {
	t.Helper()
	p := deadline.Policy{MaxAttempts: 1, RetryBudget: b}
	for range n {
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, ok)
		require.NoError(t, err)
	}
}

// retries runs calls whose first attempt fails retryably and whose second
// succeeds until one is denied, and returns how many retried.
func retries(t *testing.T, b *deadline.RetryBudget, limit int) int {
	t.Helper()
	p := deadline.Policy{MaxAttempts: 2, RetryBudget: b}
	taken := 0
	for range limit {
		var l attemptLog
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, script(&l, fail(deadline.Retryable(errFlaky)), ok))
		if err != nil {
			require.Equal(t, deadline.ReasonRetryBudget, stopErr(err).Reason, "%v", err)
			return taken
		}
		taken++
	}
	return taken
}

func TestNewRetryBudgetRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name  string
		opt   deadline.RetryBudgetOption
		field string
	}{
		{"negative ratio", deadline.WithRetryRatio(-0.1), "deadline.WithRetryRatio"},
		{"ratio above one", deadline.WithRetryRatio(1.5), "deadline.WithRetryRatio"},
		{"NaN ratio", deadline.WithRetryRatio(math.NaN()), "deadline.WithRetryRatio"},
		{"zero window", deadline.WithRetryWindow(0), "deadline.WithRetryWindow"},
		{"negative window", deadline.WithRetryWindow(-time.Second), "deadline.WithRetryWindow"},
		{"negative min rate", deadline.WithMinRetryRate(-1), "deadline.WithMinRetryRate"},
		{"infinite min rate", deadline.WithMinRetryRate(math.Inf(1)), "deadline.WithMinRetryRate"},
		{"NaN min rate", deadline.WithMinRetryRate(math.NaN()), "deadline.WithMinRetryRate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := deadline.NewRetryBudget(tt.opt)
			assert.Nil(t, b)
			var pe *deadline.PolicyError
			require.ErrorAs(t, err, &pe)
			assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
			assert.Equal(t, tt.field, pe.Field)
			assert.Contains(t, err.Error(), "must be")
		})
	}
	// The edges are allowed, and nil options are ignored.
	_, err := deadline.NewRetryBudget(deadline.WithRetryRatio(0), deadline.WithRetryRatio(1), deadline.WithMinRetryRate(0), nil)
	assert.NoError(t, err)
}

func TestPolicyRejectsZeroRetryBudget(t *testing.T) {
	p := deadline.DefaultPolicy()
	p.RetryBudget = &deadline.RetryBudget{}
	var pe *deadline.PolicyError
	require.ErrorAs(t, p.Validate(), &pe)
	assert.Equal(t, "Policy.RetryBudget", pe.Field)
	calls := 0
	_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, func(context.Context, deadline.AttemptInfo) (int, error) {
		calls++
		return 0, nil
	})
	assert.ErrorAs(t, err, &pe)
	assert.Zero(t, calls)
}

func TestRetryBudgetDefaults(t *testing.T) {
	b := newBudget(t)
	assert.Equal(t, 0.2, b.Ratio())
	assert.Equal(t, 10*time.Second, b.Window())
	assert.Equal(t, 100, b.Balance(), "10 retries/s over a 10s window")
}

// The ratio: with no minimum rate, ten first attempts allow two retries at
// 20 %, and the third is denied.
func TestRetryBudgetRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, deadline.WithMinRetryRate(0))
		assert.Equal(t, 0, b.Balance())
		assert.Zero(t, retries(t, b, 5), "no first attempt yet: no retry")
		// retries() made one first attempt too, the one denied.
		firstAttempts(t, b, 9)
		assert.Equal(t, 2, b.Balance())
		// Each call of retries() deposits one more first attempt: 11, 12
		// first attempts allow 2 retries; the third call (13 first
		// attempts, 2.6 retries) is denied.
		assert.Equal(t, 2, retries(t, b, 5))
		assert.Equal(t, 0, b.Balance())
	})
}

// The minimum rate allows minRate × window retries with no first attempt.
func TestRetryBudgetMinRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, deadline.WithRetryRatio(0), deadline.WithMinRetryRate(2), deadline.WithRetryWindow(time.Second))
		assert.Equal(t, 2, b.Balance())
		assert.Equal(t, 2, retries(t, b, 5))
		assert.Equal(t, 0, b.Balance())
	})
}

// Counts leave the window a tenth of it at a time, on the monotonic clock.
func TestRetryBudgetWindowSlides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, deadline.WithRetryRatio(1), deadline.WithMinRetryRate(0))
		firstAttempts(t, b, 3) // bucket 0
		time.Sleep(5 * time.Second)
		firstAttempts(t, b, 2) // bucket 5
		assert.Equal(t, 5, b.Balance())
		time.Sleep(5*time.Second - time.Nanosecond)
		assert.Equal(t, 5, b.Balance(), "bucket 0 is still inside the window")
		time.Sleep(time.Nanosecond) // the instant the bucket leaves
		assert.Equal(t, 2, b.Balance(), "bucket 0 left the window at 10s")
		time.Sleep(5 * time.Second)
		assert.Equal(t, 0, b.Balance(), "everything expired")
		// A bucket is reused for a later epoch from zero.
		firstAttempts(t, b, 1)
		assert.Equal(t, 1, b.Balance())
	})
}

// Charges draw the balance below zero and expire like retries.
func TestRetryBudgetCharge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, deadline.WithRetryRatio(0), deadline.WithMinRetryRate(1), deadline.WithRetryWindow(time.Second))
		b.Charge(0)
		b.Charge(-3)
		assert.Equal(t, 1, b.Balance())
		b.Charge(3)
		assert.Equal(t, -2, b.Balance())
		assert.Zero(t, retries(t, b, 3))
		time.Sleep(time.Second)
		assert.Equal(t, 1, b.Balance())
	})
}

// Thousands of callers share one budget: the retries granted never exceed
// the allowance, and no token is lost to contention (a withdrawal that
// overdrew is returned): the balance is exactly the allowance less the
// retries granted.
func TestRetryBudgetConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const callers, firsts = 2000, 5
		b := newBudget(t, deadline.WithMinRetryRate(1)) // 10 + 20 % of first attempts
		var calls, granted, denied atomic.Int64
		var start sync.WaitGroup
		start.Add(1)
		var wg sync.WaitGroup
		bg, d := context.Background(), deadline.New(time.Second)
		first := deadline.Policy{MaxAttempts: 1, RetryBudget: b}
		retry := deadline.Policy{MaxAttempts: 2, RetryBudget: b}
		for range callers {
			wg.Go(func() {
				start.Wait()
				for range firsts {
					_, err := deadline.Do(bg, d, first, ok)
					assert.NoError(t, err)
				}
				for range 2 {
					calls.Add(1)
					var l attemptLog
					_, err := deadline.Do(bg, d, retry, script(&l, fail(deadline.Retryable(errFlaky)), ok))
					switch {
					case err == nil:
						granted.Add(1)
					case errors.Is(err, deadline.ErrRetryBudgetExhausted):
						denied.Add(1)
					default:
						assert.NoError(t, err)
					}
				}
			})
		}
		start.Done()
		wg.Wait()
		allowance := int64(10 + 0.2*float64(callers*firsts+calls.Load()) + 1e-9)
		t.Logf("%d retries asked, %d granted, %d denied, allowance %d", calls.Load(), granted.Load(), denied.Load(), allowance)
		assert.LessOrEqual(t, granted.Load(), allowance)
		assert.Positive(t, denied.Load(), "the budget ran out")
		assert.Equal(t, allowance-granted.Load(), int64(b.Balance()))
	})
}

// A denied retry stops the call at once, without sleeping its backoff,
// keeps the last error, and says so in the hooks and the verdict.
func TestDoRetryBudgetDenied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, deadline.WithRetryRatio(0), deadline.WithMinRetryRate(0))
		rec := &recorder{}
		p := deadline.Policy{
			Name: "fetch", MaxAttempts: 3, RetryBudget: b, Hooks: rec.hooks("h"),
			Backoff: deadline.Backoff{Base: 100 * time.Millisecond, Max: 100 * time.Millisecond, Jitter: deadline.JitterNone},
		}
		start := time.Now()
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, after(10*time.Millisecond, deadline.Retryable(errFlaky)))
		assert.Equal(t, 10*time.Millisecond, time.Since(start), "no backoff slept")
		se := stopErr(err)
		require.NotNil(t, se, "%v", err)
		assert.Equal(t, deadline.ReasonRetryBudget, se.Reason)
		assert.Equal(t, 1, se.Attempts)
		assert.Equal(t, 0, se.Balance)
		assert.ErrorIs(t, err, deadline.ErrRetryBudgetExhausted)
		assert.ErrorIs(t, err, errFlaky, "the last error is kept")
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "the time budget was not spent")
		assert.False(t, se.Timeout())
		assert.Equal(t, "retry_budget_exhausted", se.ErrorType())
		assert.Equal(t, "fetch: retry budget exhausted (balance 0) (after 1 attempt): flaky", err.Error())
		require.Len(t, rec.backoff, 1)
		bi := rec.backoff[0]
		assert.True(t, bi.Fits)
		assert.True(t, bi.RetryBudget)
		assert.True(t, bi.RetryDenied)
		assert.Equal(t, 0, bi.RetryBalance)
		require.Len(t, rec.calls, 1)
		assert.Equal(t, deadline.VerdictRetriesThrottled, deadline.VerdictOf(rec.calls[0]))
	})
}

// An allowed retry reports the balance left, and the call goes on.
func TestDoRetryBudgetAllowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, deadline.WithRetryRatio(0), deadline.WithMinRetryRate(2), deadline.WithRetryWindow(time.Second))
		rec := &recorder{}
		p := deadline.Policy{MaxAttempts: 3, RetryBudget: b, Hooks: rec.hooks("h")}
		var l attemptLog
		v, err := deadline.Do(context.Background(), deadline.New(time.Second), p,
			script(&l, fail(deadline.Retryable(errFlaky)), fail(deadline.Retryable(errFlaky)), ok))
		require.NoError(t, err)
		assert.Equal(t, 3, v)
		require.Len(t, rec.backoff, 2)
		assert.Equal(t, []int{1, 0}, []int{rec.backoff[0].RetryBalance, rec.backoff[1].RetryBalance})
		assert.False(t, rec.backoff[1].RetryDenied)
	})
}

// A wait that does not fit stops the call without asking the budget, and
// a refused call, an error that is not retried and the last attempt never
// ask it either: no token is spent on a retry that cannot start.
func TestDoRetryBudgetAskedOnlyForARetryThatFits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, deadline.WithRetryRatio(0), deadline.WithMinRetryRate(1), deadline.WithRetryWindow(time.Second))
		rec := &recorder{}
		p := deadline.Policy{
			MaxAttempts: 2, RetryBudget: b, Hooks: rec.hooks("h"),
			Backoff: deadline.Backoff{Base: time.Second, Max: time.Second, Jitter: deadline.JitterNone},
		}
		_, err := deadline.Do(context.Background(), deadline.New(500*time.Millisecond), p, fail(deadline.Retryable(errFlaky)))
		assert.Equal(t, deadline.ReasonBackoffTooLong, stopErr(err).Reason)
		require.Len(t, rec.backoff, 1)
		assert.False(t, rec.backoff[0].RetryBudget)
		assert.False(t, rec.backoff[0].RetryDenied)

		// After a retry the budget allowed, a wait that does not fit
		// reports no balance: the budget was not asked.
		p.MaxAttempts = 3
		p.Backoff = deadline.Backoff{Base: 100 * time.Millisecond, Max: 400 * time.Millisecond, Jitter: deadline.JitterNone}
		rich := newBudget(t, deadline.WithRetryRatio(0), deadline.WithMinRetryRate(5), deadline.WithRetryWindow(time.Second))
		p.RetryBudget = rich
		rec.backoff = nil
		_, err = deadline.Do(context.Background(), deadline.New(250*time.Millisecond), p, fail(deadline.Retryable(errFlaky)))
		assert.Equal(t, deadline.ReasonBackoffTooLong, stopErr(err).Reason)
		require.Len(t, rec.backoff, 2)
		assert.Equal(t, []int{4, 0}, []int{rec.backoff[0].RetryBalance, rec.backoff[1].RetryBalance})
		assert.False(t, rec.backoff[1].RetryBudget)
		p.RetryBudget, p.MaxAttempts, p.Backoff = b, 2, deadline.Backoff{Base: time.Second, Max: time.Second, Jitter: deadline.JitterNone}

		p.Backoff = deadline.Backoff{}
		_, err = deadline.Do(context.Background(), deadline.New(time.Second), p, fail(errFatal))
		assert.Equal(t, deadline.ReasonNotRetryable, stopErr(err).Reason)
		p.MaxAttempts = 1
		_, err = deadline.Do(context.Background(), deadline.New(time.Second), p, fail(deadline.Retryable(errFlaky)))
		assert.Equal(t, deadline.ReasonExhausted, stopErr(err).Reason)
		assert.Equal(t, 1, b.Balance(), "the token is still there")
	})
}

// Only first attempts that start are deposits: a retry is not, and a call
// refused below the floor sent nothing.
func TestDoRetryBudgetDepositsFirstAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, deadline.WithRetryRatio(1), deadline.WithMinRetryRate(0))
		firstAttempts(t, b, 2)
		assert.Equal(t, 2, b.Balance())
		p := deadline.Policy{MaxAttempts: 2, Floor: 10 * time.Millisecond, RetryBudget: b}
		_, err := deadline.Do(context.Background(), deadline.New(5*time.Millisecond), p, ok)
		assert.Equal(t, deadline.ReasonRefused, stopErr(err).Reason)
		assert.Equal(t, 2, b.Balance(), "a refused call deposits nothing")
		var l attemptLog
		_, err = deadline.Do(context.Background(), deadline.New(time.Second), p, script(&l, fail(deadline.Retryable(errFlaky)), ok))
		require.NoError(t, err)
		assert.Equal(t, 2, b.Balance(), "one deposit, one retry")
	})
}

// LogHooks logs the retry budget's answer on the backoff line.
func TestLogHooksRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		b := newBudget(t, deadline.WithRetryRatio(0), deadline.WithMinRetryRate(0))
		p := deadline.Policy{Name: "fetch", MaxAttempts: 2, RetryBudget: b, Hooks: deadline.LogHooks(l)}
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, fail(deadline.Retryable(errFlaky)))
		require.Error(t, err)
		assert.Contains(t, buf.String(), "fits=true retry_denied=true retry_balance=0")
		assert.Contains(t, buf.String(), "reason=retry_budget_exhausted verdict=retries_throttled")
	})
}

// With a retry budget the success path still allocates nothing beyond the
// attempt's context.
func TestDoRetryBudgetAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	d := deadline.New(time.Hour)
	p := deadline.DefaultPolicy()
	p.AttemptTimeout = time.Minute
	dop := func(ctx context.Context, _ deadline.AttemptInfo) (int, error) { return 1, ctx.Err() }
	without := testing.AllocsPerRun(200, func() { _, _ = deadline.Do(ctx, d, p, dop) })
	p.RetryBudget = newBudget(t)
	with := testing.AllocsPerRun(200, func() { _, _ = deadline.Do(ctx, d, p, dop) })
	assert.Equal(t, without, with)
	b := p.RetryBudget
	assert.Zero(t, testing.AllocsPerRun(200, func() { b.Charge(1); _ = b.Balance() }))
}

func BenchmarkRetryBudgetFirstAttempt(b *testing.B) {
	rb, err := deadline.NewRetryBudget()
	require.NoError(b, err)
	p := deadline.Policy{MaxAttempts: 1, RetryBudget: rb}
	ctx, d := context.Background(), deadline.New(time.Hour)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = deadline.Do(ctx, d, p, ok)
		}
	})
}

// BenchmarkRetryBudgetCharge is the cost of one count in a shared budget
// (a deposit or a withdrawal is one such count) under parallel callers.
func BenchmarkRetryBudgetCharge(b *testing.B) {
	rb, err := deadline.NewRetryBudget()
	require.NoError(b, err)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rb.Charge(1)
		}
	})
}

// BenchmarkRetryBudgetBalance is the cost of the check a retry makes.
func BenchmarkRetryBudgetBalance(b *testing.B) {
	rb, err := deadline.NewRetryBudget()
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		sinkInt += rb.Balance()
	}
}

var sinkInt int

// A budget whose clock reads before its origin (built outside a synctest
// bubble, used inside) still counts, at its first bucket.
func TestRetryBudgetClockBeforeOrigin(t *testing.T) {
	b := newBudget(t, deadline.WithRetryRatio(1), deadline.WithMinRetryRate(0))
	synctest.Test(t, func(t *testing.T) {
		firstAttempts(t, b, 2)
		assert.Equal(t, 2, b.Balance())
		b.Charge(2)
		assert.Equal(t, 0, b.Balance())
	})
}

// Bucket numbers are 32 bits: past 2³¹ buckets (25 days of 1ms buckets)
// the budget still counts, in every bucket, used before or not.
func TestRetryBudgetLongRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, deadline.WithRetryRatio(1), deadline.WithMinRetryRate(0), deadline.WithRetryWindow(10*time.Millisecond))
		fill := func() {
			for i := range 10 {
				firstAttempts(t, b, 1)
				assert.Equal(t, i+1, b.Balance(), "bucket %d", i)
				time.Sleep(time.Millisecond)
			}
		}
		fill()
		time.Sleep(1<<31*time.Millisecond + 3*time.Millisecond)
		assert.Equal(t, 0, b.Balance())
		fill()
		time.Sleep(1 << 30 * time.Millisecond)
		assert.Equal(t, 0, b.Balance())
		fill()
	})
}

// A minimum rate so large that its allowance does not fit an int saturates
// the balance at math.MaxInt instead of overflowing to a negative one, and
// retries are allowed.
func TestRetryBudgetBalanceSaturates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, rate := range []float64{1e18, math.MaxFloat64} {
			b := newBudget(t, deadline.WithRetryRatio(0), deadline.WithMinRetryRate(rate))
			assert.Equal(t, math.MaxInt, b.Balance(), "rate %g", rate)
			assert.Equal(t, 3, retries(t, b, 3), "rate %g", rate)
			assert.Equal(t, math.MaxInt, b.Balance(), "rate %g", rate)
		}
		b := newBudget(t, deadline.WithRetryRatio(0), deadline.WithMinRetryRate(1e17)) // 1e18 over 10s: fits
		assert.Equal(t, int(1e18), b.Balance())
	})
}

package deadline_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Rule 1: granted = min(ceiling, remaining - floor), no ceiling: remaining -
// floor; the caller's context deadline counts when it is earlier.
func TestDoLease(t *testing.T) {
	cases := []struct {
		name           string
		budget         time.Duration
		ctxTimeout     time.Duration // 0: none
		ceiling, floor time.Duration
		granted        time.Duration
		limitedBy      deadline.Limit
	}{
		{"ceiling smaller", time.Second, 0, 250 * time.Millisecond, 20 * time.Millisecond, 250 * time.Millisecond, deadline.LimitCeiling},
		{"no ceiling", time.Second, 0, 0, 20 * time.Millisecond, 980 * time.Millisecond, deadline.LimitDeadline},
		{"no ceiling no floor", time.Second, 0, 0, 0, time.Second, deadline.LimitDeadline},
		{"deadline smaller", 200 * time.Millisecond, 0, 250 * time.Millisecond, 20 * time.Millisecond, 180 * time.Millisecond, deadline.LimitDeadline},
		{"equal goes to the ceiling", 270 * time.Millisecond, 0, 250 * time.Millisecond, 20 * time.Millisecond, 250 * time.Millisecond, deadline.LimitCeiling},
		{"caller deadline earlier", time.Second, 100 * time.Millisecond, 250 * time.Millisecond, 20 * time.Millisecond, 80 * time.Millisecond, deadline.LimitDeadline},
		{"caller deadline later", 100 * time.Millisecond, time.Second, 0, 20 * time.Millisecond, 80 * time.Millisecond, deadline.LimitDeadline},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				if tc.ctxTimeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.ctxTimeout)
					defer cancel()
				}
				d := deadline.New(tc.budget)
				var l attemptLog
				v, err := deadline.Do(ctx, d, policy(1, tc.ceiling, tc.floor), script(&l, ok))
				require.NoError(t, err)
				assert.Equal(t, 1, v)
				require.Len(t, l.infos, 1)
				a := l.infos[0]
				assert.Equal(t, tc.granted, a.Granted)
				assert.Equal(t, tc.limitedBy, a.LimitedBy)
				assert.Equal(t, tc.ceiling, a.Ceiling)
				assert.Equal(t, 1, a.Number)
				assert.Equal(t, "step", a.Name)
				remaining := tc.budget
				if tc.ctxTimeout > 0 {
					remaining = min(remaining, tc.ctxTimeout)
				}
				assert.Equal(t, remaining, a.Remaining)
				assert.True(t, a.Start.Equal(time.Now()), "attempt start is the grant instant")
				assert.True(t, l.deadline[0].Equal(a.Start.Add(tc.granted)), "the op's context ends at the grant")
			})
		})
	}
}

// Rule 1: context.Cause tells the attempt's ceiling from the shared deadline.
func TestDoAttemptEndedBy(t *testing.T) {
	t.Run("deadline cuts the attempt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := deadline.New(100 * time.Millisecond)
			var l attemptLog
			var rec recorder
			p := policy(3, 0, 10*time.Millisecond)
			p.Hooks = rec.hooks("")
			start := time.Now()
			_, err := deadline.Do(context.Background(), d, p, script(&l, hang))
			assert.Equal(t, 90*time.Millisecond, time.Since(start), "cut at remaining - floor")
			require.Equal(t, []error{deadline.ErrDeadlineReached}, l.causes)
			se := stopErr(err)
			require.NotNil(t, se)
			assert.Equal(t, deadline.ReasonDeadline, se.Reason)
			assert.Equal(t, 1, se.Attempts, "the deadline is not retried")
			assert.ErrorIs(t, err, deadline.ErrDeadlineReached)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, context.DeadlineExceeded, se.Last, "the op's own error is kept")
			assert.True(t, se.Timeout())
			require.Len(t, rec.calls, 1)
			assert.Equal(t, 1, rec.calls[0].DeadlineCuts)
			assert.Equal(t, 0, rec.calls[0].CeilingTimeouts)
			assert.Equal(t, 10*time.Millisecond, rec.calls[0].Remaining)
			assert.Equal(t, deadline.EndedDeadline, rec.ends[0].EndedBy)
			assert.False(t, rec.ends[0].Retryable)
		})
	})
	t.Run("ceiling ends the attempt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := deadline.New(time.Second)
			var l attemptLog
			start := time.Now()
			_, err := deadline.Do(context.Background(), d, policy(1, 100*time.Millisecond, 20*time.Millisecond), script(&l, hang))
			assert.Equal(t, 100*time.Millisecond, time.Since(start))
			require.Equal(t, []error{deadline.ErrCeilingReached}, l.causes)
			se := stopErr(err)
			require.NotNil(t, se)
			assert.Equal(t, deadline.ReasonExhausted, se.Reason, "a slow attempt is retryable; one attempt allowed")
			ate, ok := errors.AsType[*deadline.AttemptTimeoutError](err)
			require.True(t, ok)
			assert.Equal(t, 1, ate.Attempt)
			assert.Equal(t, 100*time.Millisecond, ate.Ceiling)
			assert.Equal(t, context.DeadlineExceeded, ate.Err)
			assert.ErrorIs(t, err, deadline.ErrCeilingReached)
			assert.ErrorIs(t, err, deadline.ErrAttemptsExhausted)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, "attempt_timeout", ate.ErrorType())
		})
	})
	t.Run("slow attempt retried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := deadline.New(time.Second)
			var l attemptLog
			v, err := deadline.Do(context.Background(), d, policy(2, 100*time.Millisecond, 20*time.Millisecond), script(&l, hang, ok))
			require.NoError(t, err)
			assert.Equal(t, 2, v)
			assert.Equal(t, []time.Duration{100 * time.Millisecond}, l.gaps())
		})
	})
}

// Rule 2: refusal at remaining <= floor, carrying the previous error.
func TestDoRefusal(t *testing.T) {
	t.Run("before the first attempt", func(t *testing.T) {
		for _, budget := range []time.Duration{20 * time.Millisecond, 19 * time.Millisecond, 0, -time.Second} {
			synctest.Test(t, func(t *testing.T) {
				var l attemptLog
				_, err := deadline.Do(context.Background(), deadline.New(budget), policy(3, 0, 20*time.Millisecond), script(&l, ok))
				assert.Empty(t, l.infos, "op never called")
				se := stopErr(err)
				require.NotNil(t, se, "budget %v", budget)
				assert.Equal(t, deadline.ReasonRefused, se.Reason)
				assert.Equal(t, 0, se.Attempts)
				assert.Nil(t, se.Last)
				assert.Equal(t, budget, se.Remaining)
				assert.ErrorIs(t, err, deadline.ErrRefused)
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				assert.NotErrorIs(t, err, context.Canceled)
				assert.Contains(t, err.Error(), "refused before attempt 1")
			})
		}
	})
	t.Run("just above the floor runs", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var l attemptLog
			_, err := deadline.Do(context.Background(), deadline.New(21*time.Millisecond), policy(1, 0, 20*time.Millisecond), script(&l, ok))
			require.NoError(t, err)
			assert.Equal(t, time.Millisecond, l.infos[0].Granted)
		})
	})
	t.Run("carries the previous error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// A slow observer spends the budget between attempts.
			p := policy(3, 0, 20*time.Millisecond)
			p.Hooks = &deadline.Hooks{AttemptEnd: func(context.Context, deadline.AttemptInfo, deadline.AttemptResult) {
				time.Sleep(85 * time.Millisecond)
			}}
			flaky := deadline.Retryable(errFlaky)
			var l attemptLog
			_, err := deadline.Do(context.Background(), deadline.New(100*time.Millisecond), p, script(&l, fail(flaky)))
			se := stopErr(err)
			require.NotNil(t, se)
			assert.Equal(t, deadline.ReasonRefused, se.Reason)
			assert.Equal(t, 1, se.Attempts)
			assert.Same(t, flaky, se.Last)
			assert.ErrorIs(t, err, errFlaky)
			assert.ErrorIs(t, err, deadline.ErrRefused)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, "step: refused before attempt 2: 15ms left, floor 20ms (after 1 attempt): flaky", err.Error())
		})
	})
}

// Rule 3: exponential backoff, capped after jitter, with every jitter mode.
func TestDoBackoffSchedule(t *testing.T) {
	cases := []struct {
		name   string
		jitter deadline.Jitter
		rnd    func(int64) int64
		gaps   []time.Duration
	}{
		{"full at the top of the range", deadline.JitterFull, maxRand, []time.Duration{10, 20, 40, 40, 40}},
		{"full at zero", deadline.JitterFull, zeroRand, []time.Duration{0, 0, 0, 0, 0}},
		{"equal at zero", deadline.JitterEqual, zeroRand, []time.Duration{5, 10, 20, 20, 20}},
		{"equal at the top", deadline.JitterEqual, maxRand, []time.Duration{10, 20, 40, 40, 40}},
		{"none ignores rand", deadline.JitterNone, func(int64) int64 { panic("JitterNone must not draw") }, []time.Duration{10, 20, 40, 40, 40}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := policy(6, 0, 0)
				p.Backoff = deadline.Backoff{Base: 10 * time.Millisecond, Max: 40 * time.Millisecond, Jitter: tc.jitter}
				p.Rand = tc.rnd
				var l attemptLog
				_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, script(&l, fail(deadline.Retryable(errFlaky))))
				assert.Equal(t, deadline.ReasonExhausted, stopErr(err).Reason)
				want := make([]time.Duration, len(tc.gaps))
				for i, g := range tc.gaps {
					want[i] = g * time.Millisecond
				}
				assert.Equal(t, want, l.gaps())
			})
		})
	}
}

// Rule 3: a sleep that would reach remaining - floor is not taken.
func TestDoBackoffTooLong(t *testing.T) {
	cases := []struct {
		name  string
		sleep time.Duration
		stops bool
	}{
		{"longer than what is left", 200 * time.Millisecond, true},
		{"exactly remaining - floor", 80 * time.Millisecond, true},
		{"just shorter", 79 * time.Millisecond, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := policy(2, 0, 20*time.Millisecond)
				p.Backoff = deadline.Backoff{Base: tc.sleep, Max: tc.sleep, Jitter: deadline.JitterNone}
				var l attemptLog
				start := time.Now()
				v, err := deadline.Do(context.Background(), deadline.New(100*time.Millisecond), p, script(&l, fail(deadline.Retryable(errFlaky)), ok))
				if !tc.stops {
					require.NoError(t, err)
					assert.Equal(t, 2, v)
					assert.Equal(t, []time.Duration{tc.sleep}, l.gaps())
					return
				}
				assert.Equal(t, time.Duration(0), time.Since(start), "nothing was slept")
				se := stopErr(err)
				require.NotNil(t, se)
				assert.Equal(t, deadline.ReasonBackoffTooLong, se.Reason)
				assert.Equal(t, 1, se.Attempts)
				assert.Equal(t, tc.sleep, se.Wait)
				assert.Equal(t, 100*time.Millisecond, se.Remaining)
				assert.ErrorIs(t, err, deadline.ErrBackoffExceedsBudget)
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				assert.ErrorIs(t, err, errFlaky)
				assert.Equal(t, "step: backoff "+tc.sleep.String()+" exceeds the 80ms left above the 20ms floor (after 1 attempt): flaky", err.Error())
			})
		})
	}
}

// Rule 4: Retry-After replaces the backoff, is never shortened, and gives up
// at once when it does not fit.
func TestDoRetryAfter(t *testing.T) {
	cases := []struct {
		name string
		err  error
		gap  time.Duration
	}{
		{"longer than the backoff", deadline.Retryable(deadline.RetryAfter(err503, 300*time.Millisecond)), 300 * time.Millisecond},
		{"shorter than the backoff", deadline.Retryable(deadline.RetryAfter(err503, time.Millisecond)), time.Millisecond},
		{"marks in either order", deadline.RetryAfter(deadline.Retryable(err503), 300*time.Millisecond), 300 * time.Millisecond},
		{"zero", deadline.Retryable(deadline.RetryAfter(err503, 0)), 0},
		{"negative is zero", deadline.Retryable(deadline.RetryAfter(err503, -time.Second)), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := policy(2, 0, 20*time.Millisecond)
				// Full jitter drawing zero would retry at once: Retry-After must not.
				p.Backoff = deadline.Backoff{Base: 50 * time.Millisecond, Max: 400 * time.Millisecond}
				p.Rand = zeroRand
				var rec recorder
				p.Hooks = rec.hooks("")
				var l attemptLog
				v, err := deadline.Do(context.Background(), deadline.New(time.Second), p, script(&l, fail(tc.err), ok))
				require.NoError(t, err)
				assert.Equal(t, 2, v)
				assert.Equal(t, []time.Duration{tc.gap}, l.gaps(), "retried no sooner and no later than asked")
				require.Len(t, rec.backoff, 1)
				b := rec.backoff[0]
				assert.Equal(t, deadline.SourceRetryAfter, b.Source)
				assert.Equal(t, tc.gap, b.Delay)
				assert.Equal(t, tc.gap, b.RetryAfter)
				assert.True(t, b.Fits)
			})
		})
	}
	t.Run("too long", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := policy(3, 0, 20*time.Millisecond)
			p.Name = "fetch"
			var rec recorder
			p.Hooks = rec.hooks("")
			var l attemptLog
			start := time.Now()
			_, err := deadline.Do(context.Background(), deadline.New(time.Second), p,
				script(&l, after(110*time.Millisecond, deadline.Retryable(deadline.RetryAfter(err503, 3*time.Second)))))
			assert.Equal(t, 110*time.Millisecond, time.Since(start), "no sleep after the attempt")
			se := stopErr(err)
			require.NotNil(t, se)
			assert.Equal(t, deadline.ReasonRetryAfterTooLong, se.Reason)
			assert.Equal(t, 3*time.Second, se.Wait)
			assert.Equal(t, 1, se.Attempts)
			assert.ErrorIs(t, err, deadline.ErrRetryAfterExceedsBudget)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.ErrorIs(t, err, err503)
			assert.Equal(t, "fetch: Retry-After 3s exceeds the 870ms left above the 20ms floor (after 1 attempt): 503 Service Unavailable (server asked to retry after 3s)", err.Error())
			require.Len(t, rec.backoff, 1)
			assert.False(t, rec.backoff[0].Fits)
			assert.Equal(t, 890*time.Millisecond, rec.backoff[0].Remaining)
		})
	})
	t.Run("not retryable wins", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var l attemptLog
			_, err := deadline.Do(context.Background(), deadline.New(time.Second), policy(3, 0, 0),
				script(&l, fail(deadline.RetryAfter(errFatal, time.Millisecond))))
			assert.Equal(t, deadline.ReasonNotRetryable, stopErr(err).Reason)
			assert.Len(t, l.infos, 1)
		})
	})
}

// Rule 5: the default classifier retries only marked errors; a policy's own
// classifier replaces it.
func TestDoClassifier(t *testing.T) {
	isFlaky := func(err error) bool { return errors.Is(err, errFlaky) }
	cases := []struct {
		name      string
		retryable func(error) bool
		err       error
		attempts  int
		reason    deadline.Reason
	}{
		{"default, marked", nil, deadline.Retryable(errFlaky), 3, deadline.ReasonExhausted},
		{"default, unmarked", nil, errFlaky, 1, deadline.ReasonNotRetryable},
		{"default, marked deep in a chain", nil, errors.Join(errFatal, deadline.Retryable(errFlaky)), 3, deadline.ReasonExhausted},
		{"default, context.DeadlineExceeded", nil, context.DeadlineExceeded, 1, deadline.ReasonNotRetryable},
		{"custom says yes", isFlaky, errFlaky, 3, deadline.ReasonExhausted},
		{"custom says no to a marked error", isFlaky, deadline.Retryable(errFatal), 1, deadline.ReasonNotRetryable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := policy(3, 0, 0)
				p.Retryable = tc.retryable
				var l attemptLog
				_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, script(&l, fail(tc.err)))
				se := stopErr(err)
				require.NotNil(t, se)
				assert.Equal(t, tc.reason, se.Reason)
				assert.Equal(t, tc.attempts, se.Attempts)
				assert.Len(t, l.infos, tc.attempts)
				assert.ErrorIs(t, err, tc.err)
				assert.ErrorIs(t, err, tc.reason.Sentinel())
				assert.False(t, se.Timeout())
			})
		})
	}
}

// Rule 6: every stop reason, its sentinel, what it matches, and the attempts.
func TestDoStopReasons(t *testing.T) {
	flaky := deadline.Retryable(errFlaky)
	cases := []struct {
		name     string
		budget   time.Duration
		p        func(*deadline.Policy)
		op       func(context.Context, deadline.AttemptInfo) (int, error)
		cancelAt time.Duration // 0: never
		reason   deadline.Reason
		attempts int
		last     error // nil: none
		timeout  bool  // matches context.DeadlineExceeded
		canceled bool  // matches context.Canceled
	}{
		{name: "not retryable", budget: time.Second, op: fail(errFatal), reason: deadline.ReasonNotRetryable, attempts: 1, last: errFatal},
		{name: "exhausted", budget: time.Second, op: fail(flaky), reason: deadline.ReasonExhausted, attempts: 3, last: errFlaky},
		{name: "refused", budget: 10 * time.Millisecond, op: ok, reason: deadline.ReasonRefused, timeout: true},
		{name: "backoff too long", budget: 100 * time.Millisecond, p: func(p *deadline.Policy) {
			p.Backoff = deadline.Backoff{Base: time.Second, Max: time.Second, Jitter: deadline.JitterNone}
		}, op: fail(flaky), reason: deadline.ReasonBackoffTooLong, attempts: 1, last: errFlaky, timeout: true},
		{name: "retry-after too long", budget: 100 * time.Millisecond, op: fail(deadline.RetryAfter(flaky, time.Second)),
			reason: deadline.ReasonRetryAfterTooLong, attempts: 1, last: errFlaky, timeout: true},
		{name: "deadline", budget: 100 * time.Millisecond, op: hang, reason: deadline.ReasonDeadline, attempts: 1, last: context.DeadlineExceeded, timeout: true},
		{name: "canceled mid-attempt", budget: time.Second, op: hang, cancelAt: 30 * time.Millisecond,
			reason: deadline.ReasonCanceled, attempts: 1, last: context.Canceled, canceled: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tc.cancelAt > 0 {
					time.AfterFunc(tc.cancelAt, cancel)
				}
				p := policy(3, 0, 20*time.Millisecond)
				if tc.p != nil {
					tc.p(&p)
				}
				_, err := deadline.Do(ctx, deadline.New(tc.budget), p, tc.op)
				require.Error(t, err)
				se, ok := errors.AsType[*deadline.StopError](err)
				require.True(t, ok)
				assert.Equal(t, tc.reason, se.Reason)
				assert.Equal(t, tc.attempts, se.Attempts)
				assert.Equal(t, tc.reason.String(), se.ErrorType())
				assert.ErrorIs(t, err, tc.reason.Sentinel())
				if tc.last != nil {
					assert.ErrorIs(t, err, tc.last)
				} else {
					assert.Nil(t, se.Last)
				}
				assert.Equal(t, tc.timeout, errors.Is(err, context.DeadlineExceeded), "matches context.DeadlineExceeded")
				assert.Equal(t, tc.canceled, errors.Is(err, context.Canceled), "matches context.Canceled")
				assert.Equal(t, tc.timeout, se.Timeout())
				assert.Equal(t, tc.timeout, tc.reason.Budget())
			})
		})
	}
}

// Rule 7: the caller's cancellation ends an attempt or a sleep at once and is
// reported as canceled, not as a timeout.
func TestDoCanceled(t *testing.T) {
	t.Run("mid-attempt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(30*time.Millisecond, cancel)
			var l attemptLog
			var rec recorder
			p := policy(3, 0, 20*time.Millisecond)
			p.Hooks = rec.hooks("")
			start := time.Now()
			_, err := deadline.Do(ctx, deadline.New(time.Second), p, script(&l, hang))
			assert.Equal(t, 30*time.Millisecond, time.Since(start), "promptly")
			assert.Equal(t, []error{context.Canceled}, l.causes)
			assert.Equal(t, deadline.ReasonCanceled, stopErr(err).Reason)
			assert.ErrorIs(t, err, context.Canceled)
			assert.ErrorIs(t, err, deadline.ErrCanceled)
			assert.NotErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, deadline.EndedCanceled, rec.ends[0].EndedBy)
			assert.Equal(t, 0, rec.calls[0].DeadlineCuts+rec.calls[0].CeilingTimeouts)
		})
	})
	t.Run("mid-sleep", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(100*time.Millisecond, cancel)
			p := policy(3, 0, 20*time.Millisecond)
			p.Backoff = deadline.Backoff{Base: 500 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: deadline.JitterNone}
			var l attemptLog
			start := time.Now()
			_, err := deadline.Do(ctx, deadline.New(time.Second), p, script(&l, fail(deadline.Retryable(errFlaky))))
			assert.Equal(t, 100*time.Millisecond, time.Since(start), "the sleep ended with the context")
			se := stopErr(err)
			require.NotNil(t, se)
			assert.Equal(t, deadline.ReasonCanceled, se.Reason)
			assert.Equal(t, 1, se.Attempts)
			assert.ErrorIs(t, err, context.Canceled)
			assert.ErrorIs(t, err, errFlaky, "the last attempt's error is kept")
			assert.NotErrorIs(t, err, context.DeadlineExceeded)
		})
	})
	t.Run("before the call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var l attemptLog
			_, err := deadline.Do(ctx, deadline.New(time.Second), policy(3, 0, 0), script(&l, ok))
			assert.Empty(t, l.infos)
			assert.Equal(t, deadline.ReasonCanceled, stopErr(err).Reason)
			assert.Equal(t, 0, stopErr(err).Attempts)
			assert.ErrorIs(t, err, context.Canceled)
		})
	})
}

// The caller's context deadline is honoured when earlier than d.
func TestDoCallerDeadlineEarlier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		d := deadline.New(time.Second)
		var l attemptLog
		start := time.Now()
		_, err := deadline.Do(ctx, d, policy(3, 0, 20*time.Millisecond), script(&l, hang))
		assert.Equal(t, 80*time.Millisecond, time.Since(start))
		assert.Equal(t, deadline.ReasonDeadline, stopErr(err).Reason)
		assert.Equal(t, 80*time.Millisecond, l.infos[0].Granted)
		assert.Equal(t, 920*time.Millisecond, d.Remaining(), "d itself is untouched")
	})
}

// Rule 8: a panic propagates after the attempt's context is released and
// every hook that began has been closed, exactly once.
func TestDoPanic(t *testing.T) {
	for _, attempt := range []int{1, 2} {
		t.Run("on attempt "+itoa(attempt), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rec recorder
				p := policy(3, 0, 20*time.Millisecond)
				p.Hooks = rec.hooks("")
				var actx context.Context
				op := func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
					if a.Number < attempt {
						return 0, deadline.Retryable(errFlaky)
					}
					actx = ctx
					panic("boom")
				}
				recovered := func() (r any) {
					defer func() { r = recover() }()
					_, _ = deadline.Do(context.Background(), deadline.New(time.Second), p, op)
					return nil
				}()
				assert.Equal(t, "boom", recovered)
				require.NotNil(t, actx)
				assert.ErrorIs(t, actx.Err(), context.Canceled, "the attempt's context was released")
				var panics, callEnds int
				for _, e := range rec.ends {
					if e.EndedBy == deadline.EndedPanic {
						panics++
					}
				}
				assert.Equal(t, 1, panics)
				assert.Len(t, rec.ends, attempt, "one AttemptEnd per AttemptStart")
				require.Len(t, rec.calls, 1)
				callEnds = len(rec.calls)
				assert.Equal(t, 1, callEnds)
				assert.Equal(t, deadline.ReasonPanic, rec.calls[0].Reason)
				assert.Equal(t, attempt, rec.calls[0].Attempts)
				assert.Nil(t, rec.calls[0].Err)
				assert.Equal(t, "CallEnd panic", rec.events[len(rec.events)-1])
			})
		})
	}
	t.Run("no hooks", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var actx context.Context
			assert.PanicsWithValue(t, "boom", func() {
				_, _ = deadline.Do(context.Background(), deadline.New(time.Second), policy(1, 0, 0),
					func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
						actx = ctx
						panic("boom")
					})
			})
			assert.ErrorIs(t, actx.Err(), context.Canceled)
		})
	})
}

// Each attempt gets its own context, released when op returns.
func TestDoAttemptContexts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l attemptLog
		flaky := fail(deadline.Retryable(errFlaky))
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), policy(3, 0, 0), script(&l, flaky, flaky, ok))
		require.NoError(t, err)
		require.Len(t, l.ctxs, 3)
		for i, c := range l.ctxs {
			assert.ErrorIs(t, c.Err(), context.Canceled, "attempt %d released", i+1)
			assert.Equal(t, i+1, l.infos[i].Number)
		}
		assert.NotSame(t, l.ctxs[0], l.ctxs[1])
	})
}

func TestReason(t *testing.T) {
	cases := []struct {
		r        deadline.Reason
		name     string
		sentinel error
		budget   bool
	}{
		{deadline.ReasonSuccess, "success", nil, false},
		{deadline.ReasonNotRetryable, "not_retryable", deadline.ErrNotRetryable, false},
		{deadline.ReasonExhausted, "attempts_exhausted", deadline.ErrAttemptsExhausted, false},
		{deadline.ReasonRefused, "refused", deadline.ErrRefused, true},
		{deadline.ReasonBackoffTooLong, "backoff_exceeds_budget", deadline.ErrBackoffExceedsBudget, true},
		{deadline.ReasonRetryAfterTooLong, "retry_after_exceeds_budget", deadline.ErrRetryAfterExceedsBudget, true},
		{deadline.ReasonDeadline, "deadline_exceeded", deadline.ErrDeadlineReached, true},
		{deadline.ReasonCanceled, "canceled", deadline.ErrCanceled, false},
		{deadline.ReasonPanic, "panic", nil, false},
		{deadline.ReasonRefusedLearned, "refused_learned", deadline.ErrRefusedLearned, true},
		{deadline.Reason(200), "reason(200)", nil, false},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.name, tc.r.String())
		assert.Equal(t, tc.sentinel, tc.r.Sentinel())
		assert.Equal(t, tc.budget, tc.r.Budget(), tc.name)
		if tc.budget {
			assert.ErrorIs(t, tc.sentinel, context.DeadlineExceeded, tc.name)
		}
	}
	assert.ErrorIs(t, deadline.ErrCanceled, context.Canceled)
	assert.ErrorIs(t, deadline.ErrCeilingReached, context.DeadlineExceeded)
	assert.NotErrorIs(t, deadline.ErrNotRetryable, context.DeadlineExceeded)
}

func TestStopErrorUnwrap(t *testing.T) {
	assert.Nil(t, (&deadline.StopError{Reason: deadline.ReasonPanic}).Unwrap())
	assert.Equal(t, []error{errFatal}, (&deadline.StopError{Reason: deadline.ReasonPanic, Last: errFatal}).Unwrap())
	assert.Equal(t, []error{deadline.ErrRefused}, (&deadline.StopError{Reason: deadline.ReasonRefused}).Unwrap())
	assert.Equal(t, []error{deadline.ErrRefused, errFatal}, (&deadline.StopError{Reason: deadline.ReasonRefused, Last: errFatal}).Unwrap())
	assert.Equal(t, "deadline: attempts exhausted (after 2 attempts): fatal",
		(&deadline.StopError{Reason: deadline.ReasonExhausted, Attempts: 2, Last: errFatal}).Error())
}

// What ended a failed attempt is whichever limit was reached first, decided
// from the instants and not from which timer fired; a tie between the
// ceiling and the deadline goes to the ceiling when the ceiling bound the
// grant.
func TestDoFirstLimitEndsTheAttempt(t *testing.T) {
	const ms = time.Millisecond
	// ignoring returns an op that sleeps dur whatever its context says, then
	// returns the context's error.
	ignoring := func(dur time.Duration) func(context.Context, deadline.AttemptInfo) (int, error) {
		return func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
			time.Sleep(dur)
			return 0, ctx.Err()
		}
	}
	cases := []struct {
		name        string
		budget      time.Duration
		ctxTimeout  time.Duration // the caller's context deadline; 0: none
		cancelAt    time.Duration // the caller cancels; 0: never
		p           deadline.Policy
		op          func(context.Context, deadline.AttemptInfo) (int, error)
		ended       deadline.EndedBy
		reason      deadline.Reason
		ceilingOuts int
		cuts        int
		verdict     deadline.Verdict
	}{
		{
			name:   "late return after the ceiling and the caller's deadline",
			budget: 100 * ms, ctxTimeout: 100 * ms, p: policy(1, 50*ms, 0), op: ignoring(200 * ms),
			ended: deadline.EndedAttemptTimeout, reason: deadline.ReasonExhausted, ceilingOuts: 1,
			verdict: deadline.VerdictTooSlow,
		},
		{
			name:   "late return, then refused",
			budget: 100 * ms, ctxTimeout: 100 * ms, p: policy(3, 50*ms, 0), op: ignoring(200 * ms),
			ended: deadline.EndedAttemptTimeout, reason: deadline.ReasonRefused, ceilingOuts: 1,
			verdict: deadline.VerdictTooSlow,
		},
		{
			name:   "ceiling and caller's deadline at the same instant",
			budget: time.Second, ctxTimeout: 100 * ms, p: policy(1, 100*ms, 0), op: hang,
			ended: deadline.EndedAttemptTimeout, reason: deadline.ReasonExhausted, ceilingOuts: 1,
			verdict: deadline.VerdictTooSlow,
		},
		{
			name:   "deadline bound the grant, and the caller's deadline at the same instant",
			budget: time.Second, ctxTimeout: 100 * ms, p: policy(1, 0, 0), op: hang,
			ended: deadline.EndedDeadline, reason: deadline.ReasonDeadline, cuts: 1,
			verdict: deadline.VerdictDeadlineTooSmall,
		},
		{
			name:   "op's own error at the ceiling's instant",
			budget: time.Second, p: policy(1, 100*ms, 0), op: after(100*ms, errFatal),
			ended: deadline.EndedAttemptTimeout, reason: deadline.ReasonExhausted, ceilingOuts: 1,
			verdict: deadline.VerdictTooSlow,
		},
		{
			name:   "op's own error just before the ceiling",
			budget: time.Second, p: policy(1, 100*ms, 0), op: after(100*ms-1, errFatal),
			ended: deadline.EndedError, reason: deadline.ReasonNotRetryable,
			verdict: deadline.VerdictFailed,
		},
		{
			name:   "caller cancels after the ceiling, op returns later",
			budget: time.Second, cancelAt: 80 * ms, p: policy(3, 50*ms, 0), op: ignoring(200 * ms),
			ended: deadline.EndedAttemptTimeout, reason: deadline.ReasonCanceled, ceilingOuts: 1,
			verdict: deadline.VerdictCanceled,
		},
		{
			name:   "caller cancels before the ceiling, op returns later",
			budget: time.Second, cancelAt: 30 * ms, p: policy(3, 50*ms, 0), op: ignoring(200 * ms),
			ended: deadline.EndedCanceled, reason: deadline.ReasonCanceled,
			verdict: deadline.VerdictCanceled,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tc.ctxTimeout > 0 {
					var cancelT context.CancelFunc
					ctx, cancelT = context.WithTimeout(ctx, tc.ctxTimeout)
					defer cancelT()
				}
				if tc.cancelAt > 0 {
					defer time.AfterFunc(tc.cancelAt, cancel).Stop()
				}
				var rec recorder
				p := tc.p
				p.Hooks = rec.hooks("")
				_, err := deadline.Do(ctx, deadline.New(tc.budget), p, tc.op)
				se := stopErr(err)
				require.NotNil(t, se, "got %v", err)
				assert.Equal(t, tc.reason, se.Reason)
				require.NotEmpty(t, rec.ends)
				assert.Equal(t, tc.ended, rec.ends[0].EndedBy)
				require.Len(t, rec.calls, 1)
				assert.Equal(t, tc.ceilingOuts, rec.calls[0].CeilingTimeouts, "CeilingTimeouts")
				assert.Equal(t, tc.cuts, rec.calls[0].DeadlineCuts, "DeadlineCuts")
				assert.Equal(t, tc.verdict, deadline.VerdictOf(rec.calls[0]))
				if tc.ended == deadline.EndedAttemptTimeout {
					assert.ErrorIs(t, err, deadline.ErrCeilingReached)
				}
			})
		})
	}
}

// The tie between the ceiling and the caller's deadline, run 50 times: the
// same verdict every time, whichever timer the scheduler fires first.
func TestDoCeilingDeadlineTieIsStable(t *testing.T) {
	verdicts := map[deadline.Verdict]int{}
	for range 50 {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			var rec recorder
			p := policy(1, 100*time.Millisecond, 0)
			p.Hooks = rec.hooks("")
			_, err := deadline.Do(ctx, deadline.New(time.Second), p, hang)
			require.Error(t, err)
			require.Len(t, rec.calls, 1)
			verdicts[deadline.VerdictOf(rec.calls[0])]++
		})
	}
	assert.Equal(t, map[deadline.Verdict]int{deadline.VerdictTooSlow: 50}, verdicts)
}

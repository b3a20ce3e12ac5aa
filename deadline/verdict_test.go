package deadline_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVerdictOf states the rules, first that applies: ok, canceled,
// throttled, retries_throttled, operation_too_slow (a ceiling timeout), deadline_too_small,
// operation_failed.
func TestVerdictOf(t *testing.T) {
	tests := []struct {
		reason  deadline.Reason
		ceiling int // CallResult.CeilingTimeouts
		want    deadline.Verdict
	}{
		{deadline.ReasonSuccess, 0, deadline.VerdictOK},
		{deadline.ReasonSuccess, 2, deadline.VerdictOK}, // rule 1 before rule 4
		{deadline.ReasonCanceled, 0, deadline.VerdictCanceled},
		{deadline.ReasonCanceled, 1, deadline.VerdictCanceled}, // rule 2 before rule 4
		{deadline.ReasonRetryAfterTooLong, 0, deadline.VerdictThrottled},
		{deadline.ReasonRetryAfterTooLong, 1, deadline.VerdictThrottled}, // rule 3 before rule 5
		{deadline.ReasonRetryBudget, 0, deadline.VerdictRetriesThrottled},
		{deadline.ReasonRetryBudget, 1, deadline.VerdictRetriesThrottled}, // rule 4 before rule 5
		{deadline.ReasonExhausted, 1, deadline.VerdictTooSlow},
		{deadline.ReasonDeadline, 1, deadline.VerdictTooSlow}, // rule 5 before rule 6
		{deadline.ReasonRefused, 1, deadline.VerdictTooSlow},
		{deadline.ReasonBackoffTooLong, 1, deadline.VerdictTooSlow},
		{deadline.ReasonNotRetryable, 1, deadline.VerdictTooSlow},
		{deadline.ReasonDeadline, 0, deadline.VerdictDeadlineTooSmall},
		{deadline.ReasonRefused, 0, deadline.VerdictDeadlineTooSmall},
		{deadline.ReasonRefusedLearned, 0, deadline.VerdictDeadlineTooSmall},
		{deadline.ReasonRefusedLearned, 1, deadline.VerdictTooSlow}, // rule 5 before rule 6
		{deadline.ReasonBackoffTooLong, 0, deadline.VerdictDeadlineTooSmall},
		{deadline.ReasonNotRetryable, 0, deadline.VerdictFailed},
		{deadline.ReasonExhausted, 0, deadline.VerdictFailed},
		{deadline.ReasonPanic, 0, deadline.VerdictFailed},
		{deadline.Reason(200), 0, deadline.VerdictFailed},
	}
	for _, tt := range tests {
		t.Run(tt.reason.String(), func(t *testing.T) {
			got := deadline.VerdictOf(deadline.CallResult{Reason: tt.reason, CeilingTimeouts: tt.ceiling})
			assert.Equal(t, tt.want, got, "reason %v, ceiling timeouts %d", tt.reason, tt.ceiling)
		})
	}
}

func TestVerdictString(t *testing.T) {
	for v, s := range map[deadline.Verdict]string{
		deadline.VerdictOK: "ok", deadline.VerdictCanceled: "canceled", deadline.VerdictThrottled: "throttled",
		deadline.VerdictTooSlow: "operation_too_slow", deadline.VerdictDeadlineTooSmall: "deadline_too_small",
		deadline.VerdictFailed: "operation_failed", deadline.VerdictRetriesThrottled: "retries_throttled", "": "",
	} {
		assert.Equal(t, s, v.String())
		assert.Equal(t, s, fmt.Sprint(v), "a fmt.Stringer")
	}
}

// verdictRecorder keeps what the hooks saw of one call.
type verdictRecorder struct {
	attempts []deadline.AttemptInfo
	results  []deadline.AttemptResult
	backoffs map[int]deadline.BackoffInfo // by the attempt that failed
	call     []deadline.CallResult
}

func (v *verdictRecorder) hooks() *deadline.Hooks {
	v.backoffs = map[int]deadline.BackoffInfo{}
	return &deadline.Hooks{
		AttemptEnd: func(_ context.Context, a deadline.AttemptInfo, r deadline.AttemptResult) {
			v.attempts = append(v.attempts, a)
			v.results = append(v.results, r)
		},
		Backoff: func(_ context.Context, b deadline.BackoffInfo) { v.backoffs[b.Attempt] = b },
		CallEnd: func(_ context.Context, r deadline.CallResult) { v.call = append(v.call, r) },
	}
}

// wantAttempt is what the hooks must say of one attempt.
type wantAttempt struct {
	limited deadline.Limit
	ended   deadline.EndedBy
	granted time.Duration
	backoff deadline.BackoffSource // 0 when no retry was considered
	delay   time.Duration          // the backoff's delay when backoff != 0
}

// coopSleep returns an op step that takes dur, or returns the context's error
// if the context ends first.
func coopSleep(dur time.Duration) func(context.Context, deadline.AttemptInfo) (int, error) {
	return func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
		t := time.NewTimer(dur)
		defer t.Stop()
		select {
		case <-t.C:
			return a.Number, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// failingAfter returns an op that, on attempts <= n, takes dur (ending early
// with the context's error) and then fails with err; later attempts succeed
// at once.
func failingAfter(n int, dur time.Duration, err error) func(context.Context, deadline.AttemptInfo) (int, error) {
	return func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
		if a.Number > n {
			return a.Number, nil
		}
		if _, e := coopSleep(dur)(ctx, a); e != nil {
			return 0, e
		}
		return 0, err
	}
}

func fixedBackoff(d time.Duration) deadline.Backoff {
	return deadline.Backoff{Base: d, Max: d, Jitter: deadline.JitterNone}
}

// TestVerdictMatrix runs scenarios with known answers and checks the
// verdict, the stop reason and what the hooks saw of each attempt: the same
// matrix the otelbudget observer is checked against, without OpenTelemetry.
func TestVerdictMatrix(t *testing.T) {
	const ms = time.Millisecond
	var (
		ceiling, dl                = deadline.LimitCeiling, deadline.LimitDeadline
		policySrc, retryAfterSrc   = deadline.SourcePolicy, deadline.SourceRetryAfter
		doubling                   = deadline.Backoff{Base: 50 * ms, Max: 400 * ms, Jitter: deadline.JitterNone}
		flaky                      = deadline.Retryable(errFlaky)
		badRequest                 = errors.New("400 Bad Request")
		endErr, endTimeout, endDL  = deadline.EndedError, deadline.EndedAttemptTimeout, deadline.EndedDeadline
		endOK, endCancel, endPanic = deadline.EndedCompleted, deadline.EndedCanceled, deadline.EndedPanic
	)
	tests := []struct {
		name     string
		budget   time.Duration
		policy   deadline.Policy // Floor is 20ms
		op       func(context.Context, deadline.AttemptInfo) (int, error)
		cancelAt time.Duration
		reason   deadline.Reason
		verdict  deadline.Verdict
		attempts []wantAttempt
	}{
		{
			name: "tight budget, fast op cut by the deadline", budget: 50 * ms,
			policy: deadline.Policy{MaxAttempts: 2, AttemptTimeout: 250 * ms}, op: coopSleep(40 * ms),
			reason: deadline.ReasonDeadline, verdict: deadline.VerdictDeadlineTooSmall,
			attempts: []wantAttempt{{dl, endDL, 30 * ms, 0, 0}},
		},
		{
			name: "tight budget, fast op fits", budget: 50 * ms,
			policy: deadline.Policy{MaxAttempts: 2, AttemptTimeout: 250 * ms}, op: coopSleep(10 * ms),
			reason: deadline.ReasonSuccess, verdict: deadline.VerdictOK,
			attempts: []wantAttempt{{dl, endOK, 30 * ms, 0, 0}},
		},
		{
			name: "slow op, generous budget", budget: 10 * time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 100 * ms, Backoff: doubling}, op: hang,
			reason: deadline.ReasonExhausted, verdict: deadline.VerdictTooSlow,
			attempts: []wantAttempt{
				{ceiling, endTimeout, 100 * ms, policySrc, 50 * ms},
				{ceiling, endTimeout, 100 * ms, policySrc, 100 * ms},
				{ceiling, endTimeout, 100 * ms, 0, 0},
			},
		},
		{
			name: "Retry-After too long", budget: time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms, Backoff: doubling},
			op:     failingAfter(3, 5*ms, deadline.Retryable(deadline.RetryAfter(err503, 3*time.Second))),
			reason: deadline.ReasonRetryAfterTooLong, verdict: deadline.VerdictThrottled,
			attempts: []wantAttempt{{ceiling, endErr, 250 * ms, retryAfterSrc, 3 * time.Second}},
		},
		{
			name: "Retry-After fits, then success", budget: time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms, Backoff: doubling},
			op:     failingAfter(1, 5*ms, deadline.Retryable(deadline.RetryAfter(err503, 100*ms))),
			reason: deadline.ReasonSuccess, verdict: deadline.VerdictOK,
			attempts: []wantAttempt{{ceiling, endErr, 250 * ms, retryAfterSrc, 100 * ms}, {ceiling, endOK, 250 * ms, 0, 0}},
		},
		{
			name: "refused before the first attempt", budget: 10 * ms,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms}, op: coopSleep(ms),
			reason: deadline.ReasonRefused, verdict: deadline.VerdictDeadlineTooSmall,
		},
		{
			name: "flaky, then success", budget: time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms, Backoff: doubling},
			op:     failingAfter(2, 10*ms, flaky),
			reason: deadline.ReasonSuccess, verdict: deadline.VerdictOK,
			attempts: []wantAttempt{
				{ceiling, endErr, 250 * ms, policySrc, 50 * ms},
				{ceiling, endErr, 250 * ms, policySrc, 100 * ms},
				{ceiling, endOK, 250 * ms, 0, 0},
			},
		},
		{
			name: "non-retryable error", budget: time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms, Backoff: doubling},
			op:     failingAfter(3, 10*ms, badRequest),
			reason: deadline.ReasonNotRetryable, verdict: deadline.VerdictFailed,
			attempts: []wantAttempt{{ceiling, endErr, 250 * ms, 0, 0}},
		},
		{
			name: "exhausted on 503s", budget: time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms, Backoff: doubling},
			op:     failingAfter(3, 10*ms, flaky),
			reason: deadline.ReasonExhausted, verdict: deadline.VerdictFailed,
			attempts: []wantAttempt{
				{ceiling, endErr, 250 * ms, policySrc, 50 * ms},
				{ceiling, endErr, 250 * ms, policySrc, 100 * ms},
				{ceiling, endErr, 250 * ms, 0, 0},
			},
		},
		{
			name: "caller cancels mid-attempt", budget: time.Second, cancelAt: 30 * ms,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms, Backoff: doubling}, op: hang,
			reason: deadline.ReasonCanceled, verdict: deadline.VerdictCanceled,
			attempts: []wantAttempt{{ceiling, endCancel, 250 * ms, 0, 0}},
		},
		{
			name: "caller cancels mid-sleep", budget: time.Second, cancelAt: 100 * ms,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms, Backoff: fixedBackoff(200 * ms)},
			op:     failingAfter(3, 10*ms, flaky),
			reason: deadline.ReasonCanceled, verdict: deadline.VerdictCanceled,
			attempts: []wantAttempt{{ceiling, endErr, 250 * ms, policySrc, 200 * ms}},
		},
		{
			name: "no ceiling and a hang", budget: 500 * ms,
			policy: deadline.Policy{MaxAttempts: 3, Backoff: doubling}, op: hang,
			reason: deadline.ReasonDeadline, verdict: deadline.VerdictDeadlineTooSmall,
			attempts: []wantAttempt{{dl, endDL, 480 * ms, 0, 0}},
		},
		{
			name: "mixed: slow, then cut by the deadline", budget: 300 * ms,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 200 * ms, Backoff: fixedBackoff(10 * ms)}, op: hang,
			reason: deadline.ReasonDeadline, verdict: deadline.VerdictTooSlow,
			attempts: []wantAttempt{{ceiling, endTimeout, 200 * ms, policySrc, 10 * ms}, {dl, endDL, 70 * ms, 0, 0}},
		},
		{
			name: "slow, then refused", budget: 135 * ms,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 115 * ms}, op: hang,
			reason: deadline.ReasonRefused, verdict: deadline.VerdictTooSlow,
			attempts: []wantAttempt{{ceiling, endTimeout, 115 * ms, policySrc, 0}},
		},
		{
			name: "backoff does not fit", budget: 60 * ms,
			policy: deadline.Policy{MaxAttempts: 3, Backoff: fixedBackoff(50 * ms)},
			op:     failingAfter(3, 0, flaky),
			reason: deadline.ReasonBackoffTooLong, verdict: deadline.VerdictDeadlineTooSmall,
			attempts: []wantAttempt{{dl, endErr, 40 * ms, policySrc, 50 * ms}},
		},
		{
			name: "slow, then a non-retryable error", budget: time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 100 * ms, Backoff: fixedBackoff(10 * ms)},
			op: func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
				if a.Number == 1 {
					return hang(ctx, a)
				}
				return 0, badRequest
			},
			reason: deadline.ReasonNotRetryable, verdict: deadline.VerdictTooSlow,
			attempts: []wantAttempt{{ceiling, endTimeout, 100 * ms, policySrc, 10 * ms}, {ceiling, endErr, 100 * ms, 0, 0}},
		},
		{
			name: "panic", budget: time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 100 * ms},
			op:     func(context.Context, deadline.AttemptInfo) (int, error) { panic("kaboom") },
			reason: deadline.ReasonPanic, verdict: deadline.VerdictFailed,
			attempts: []wantAttempt{{ceiling, endPanic, 100 * ms, 0, 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rec verdictRecorder
				p := tt.policy
				p.Name, p.Floor, p.Hooks = "step", 20*ms, rec.hooks()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tt.cancelAt > 0 {
					time.AfterFunc(tt.cancelAt, cancel)
				}
				var err error
				do := func() { _, err = deadline.Do(ctx, deadline.New(tt.budget), p, tt.op) }
				if tt.reason == deadline.ReasonPanic {
					require.PanicsWithValue(t, "kaboom", do)
				} else {
					do()
				}
				switch tt.reason {
				case deadline.ReasonPanic:
				case deadline.ReasonSuccess:
					require.NoError(t, err)
				default:
					se := stopErr(err)
					require.NotNil(t, se, "got %v", err)
					require.Equal(t, tt.reason, se.Reason, "engine's stop reason")
				}
				require.Len(t, rec.call, 1)
				assert.Equal(t, tt.reason, rec.call[0].Reason)
				assert.Equal(t, tt.verdict, deadline.VerdictOf(rec.call[0]))
				assert.Equal(t, len(tt.attempts), rec.call[0].Attempts)
				require.Len(t, rec.results, len(tt.attempts))
				for i, w := range tt.attempts {
					n := i + 1
					assert.Equal(t, n, rec.attempts[i].Number)
					assert.Equal(t, w.limited, rec.attempts[i].LimitedBy, "attempt %d limited_by", n)
					assert.Equal(t, w.ended, rec.results[i].EndedBy, "attempt %d ended_by", n)
					assert.Equal(t, w.granted, rec.attempts[i].Granted, "attempt %d granted", n)
					b, ok := rec.backoffs[n]
					if w.backoff == 0 {
						assert.False(t, ok, "attempt %d: no backoff", n)
						continue
					}
					require.True(t, ok, "attempt %d: a backoff", n)
					assert.Equal(t, w.backoff, b.Source, "attempt %d backoff source", n)
					assert.Equal(t, w.delay, b.Delay, "attempt %d backoff delay", n)
				}
			})
		})
	}
}

// The verdict of calls stopped in three ways: a server's Retry-After that
// did not fit, an attempt that reached its ceiling before the deadline, and
// the deadline alone.
func ExampleVerdictOf() {
	fmt.Println(deadline.VerdictOf(deadline.CallResult{Reason: deadline.ReasonRetryAfterTooLong}))
	fmt.Println(deadline.VerdictOf(deadline.CallResult{Reason: deadline.ReasonDeadline, CeilingTimeouts: 1}))
	fmt.Println(deadline.VerdictOf(deadline.CallResult{Reason: deadline.ReasonDeadline, DeadlineCuts: 1}))
	// Output:
	// throttled
	// operation_too_slow
	// deadline_too_small
}

package test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// TestVerdictOfForwards: otelbudget's Verdict and VerdictOf forward to
// package deadline, which owns the rules and tests them
// (deadline/verdict_test.go): the same answer for every reason, with and
// without a ceiling timeout.
func TestVerdictOfForwards(t *testing.T) {
	for r := deadline.Reason(0); r <= deadline.ReasonRefusedLearned+1; r++ {
		for _, ceiling := range []int{0, 1} {
			res := deadline.CallResult{Reason: r, CeilingTimeouts: ceiling}
			assert.Equal(t, deadline.VerdictOf(res), otelbudget.VerdictOf(res), "reason %v, ceiling timeouts %d", r, ceiling)
		}
	}
	assert.Equal(t, deadline.VerdictTooSlow, otelbudget.VerdictTooSlow)
}

// wantAttempt is what an attempt span must say.
type wantAttempt struct {
	limited string // deadline.attempt.limited_by
	ended   string // deadline.attempt.ended_by
	granted int64  // deadline.attempt.granted_ms
	backoff string // deadline.backoff.source; "" when no retry was considered
	delay   int64  // deadline.backoff.delay_ms when backoff != ""
}

var errFlaky = errors.New("503 Service Unavailable")

// failing returns an op that fails with err after dur on attempts <= n and
// succeeds (at once) afterwards.
func failing(n int, dur time.Duration, err error) func(context.Context, deadline.AttemptInfo) (string, error) {
	return func(ctx context.Context, a deadline.AttemptInfo) (string, error) {
		if a.Number > n {
			return "ok", nil
		}
		if _, e := sleepOp(dur, "")(ctx, a); e != nil {
			return "", e
		}
		return "", err
	}
}

func hangs(ctx context.Context, _ deadline.AttemptInfo) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

func fixed(d time.Duration) deadline.Backoff {
	return deadline.Backoff{Base: d, Max: d, Jitter: deadline.JitterNone}
}

// wantErrorType is an attempt span's error.type by ended_by, for the
// matrix's operations (whose own errors have no documented type).
var wantErrorType = map[string]string{
	"error":           "_OTHER",
	"attempt_timeout": "attempt_timeout",
	"deadline":        "deadline_exceeded",
	"panic":           "panic",
}

// TestVerdictMatrix runs scenarios with known answers and checks the
// verdict, the stop reason, and each attempt span.
func TestVerdictMatrix(t *testing.T) {
	const ms = time.Millisecond
	doubling := deadline.Backoff{Base: 50 * ms, Max: 400 * ms, Jitter: deadline.JitterNone}
	tests := []struct {
		name     string
		budget   time.Duration
		policy   deadline.Policy // Floor is 20ms unless noFloor
		op       func(context.Context, deadline.AttemptInfo) (string, error)
		cancelAt time.Duration
		reason   deadline.Reason
		verdict  otelbudget.Verdict
		attempts []wantAttempt
	}{
		{
			name: "tight budget, fast op cut by the deadline", budget: 50 * ms,
			policy: deadline.Policy{MaxAttempts: 2, AttemptTimeout: 250 * ms}, op: sleepOp(40*ms, "x"),
			reason: deadline.ReasonDeadline, verdict: otelbudget.VerdictDeadlineTooSmall,
			attempts: []wantAttempt{{"deadline", "deadline", 30, "", 0}},
		},
		{
			name: "tight budget, fast op fits", budget: 50 * ms,
			policy: deadline.Policy{MaxAttempts: 2, AttemptTimeout: 250 * ms}, op: sleepOp(10*ms, "x"),
			reason: deadline.ReasonSuccess, verdict: otelbudget.VerdictOK,
			attempts: []wantAttempt{{"deadline", "completed", 30, "", 0}},
		},
		{
			name: "slow op, generous budget", budget: 10 * time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 100 * ms, Backoff: doubling}, op: hangs,
			reason: deadline.ReasonExhausted, verdict: otelbudget.VerdictTooSlow,
			attempts: []wantAttempt{
				{"ceiling", "attempt_timeout", 100, "policy", 50},
				{"ceiling", "attempt_timeout", 100, "policy", 100},
				{"ceiling", "attempt_timeout", 100, "", 0},
			},
		},
		{
			name: "Retry-After too long", budget: time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms, Backoff: doubling},
			op:     failing(3, 5*ms, deadline.Retryable(deadline.RetryAfter(errFlaky, 3*time.Second))),
			reason: deadline.ReasonRetryAfterTooLong, verdict: otelbudget.VerdictThrottled,
			attempts: []wantAttempt{{"ceiling", "error", 250, "retry_after", 3000}},
		},
		{
			name: "Retry-After fits, then success", budget: time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms, Backoff: doubling},
			op:     failing(1, 5*ms, deadline.Retryable(deadline.RetryAfter(errFlaky, 100*ms))),
			reason: deadline.ReasonSuccess, verdict: otelbudget.VerdictOK,
			attempts: []wantAttempt{{"ceiling", "error", 250, "retry_after", 100}, {"ceiling", "completed", 250, "", 0}},
		},
		{
			name: "refused before the first attempt", budget: 10 * ms,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms}, op: sleepOp(ms, "x"),
			reason: deadline.ReasonRefused, verdict: otelbudget.VerdictDeadlineTooSmall,
		},
		{
			name: "flaky, then success", budget: time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms, Backoff: doubling},
			op:     failing(2, 10*ms, deadline.Retryable(errFlaky)),
			reason: deadline.ReasonSuccess, verdict: otelbudget.VerdictOK,
			attempts: []wantAttempt{
				{"ceiling", "error", 250, "policy", 50},
				{"ceiling", "error", 250, "policy", 100},
				{"ceiling", "completed", 250, "", 0},
			},
		},
		{
			name: "non-retryable error", budget: time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms, Backoff: doubling},
			op:     failing(3, 10*ms, errors.New("400 Bad Request")),
			reason: deadline.ReasonNotRetryable, verdict: otelbudget.VerdictFailed,
			attempts: []wantAttempt{{"ceiling", "error", 250, "", 0}},
		},
		{
			name: "exhausted on 503s", budget: time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms, Backoff: doubling},
			op:     failing(3, 10*ms, deadline.Retryable(errFlaky)),
			reason: deadline.ReasonExhausted, verdict: otelbudget.VerdictFailed,
			attempts: []wantAttempt{
				{"ceiling", "error", 250, "policy", 50},
				{"ceiling", "error", 250, "policy", 100},
				{"ceiling", "error", 250, "", 0},
			},
		},
		{
			name: "caller cancels mid-attempt", budget: time.Second, cancelAt: 30 * ms,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms, Backoff: doubling}, op: hangs,
			reason: deadline.ReasonCanceled, verdict: otelbudget.VerdictCanceled,
			attempts: []wantAttempt{{"ceiling", "canceled", 250, "", 0}},
		},
		{
			name: "caller cancels mid-sleep", budget: time.Second, cancelAt: 100 * ms,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 250 * ms, Backoff: fixed(200 * ms)},
			op:     failing(3, 10*ms, deadline.Retryable(errFlaky)),
			reason: deadline.ReasonCanceled, verdict: otelbudget.VerdictCanceled,
			attempts: []wantAttempt{{"ceiling", "error", 250, "policy", 200}},
		},
		{
			name: "no ceiling and a hang", budget: 500 * ms,
			policy: deadline.Policy{MaxAttempts: 3, Backoff: doubling}, op: hangs,
			reason: deadline.ReasonDeadline, verdict: otelbudget.VerdictDeadlineTooSmall,
			attempts: []wantAttempt{{"deadline", "deadline", 480, "", 0}},
		},
		{
			name: "mixed: slow, then cut by the deadline", budget: 300 * ms,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 200 * ms, Backoff: fixed(10 * ms)}, op: hangs,
			reason: deadline.ReasonDeadline, verdict: otelbudget.VerdictTooSlow,
			attempts: []wantAttempt{{"ceiling", "attempt_timeout", 200, "policy", 10}, {"deadline", "deadline", 70, "", 0}},
		},
		{
			name: "slow, then refused", budget: 135 * ms,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 115 * ms}, op: hangs,
			reason: deadline.ReasonRefused, verdict: otelbudget.VerdictTooSlow,
			attempts: []wantAttempt{{"ceiling", "attempt_timeout", 115, "policy", 0}},
		},
		{
			name: "backoff does not fit", budget: 60 * ms,
			policy: deadline.Policy{MaxAttempts: 3, Backoff: fixed(50 * ms)},
			op:     failing(3, 0, deadline.Retryable(errFlaky)),
			reason: deadline.ReasonBackoffTooLong, verdict: otelbudget.VerdictDeadlineTooSmall,
			attempts: []wantAttempt{{"deadline", "error", 40, "policy", 50}},
		},
		{
			name: "slow, then a non-retryable error", budget: time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 100 * ms, Backoff: fixed(10 * ms)},
			op: func(ctx context.Context, a deadline.AttemptInfo) (string, error) {
				if a.Number == 1 {
					return hangs(ctx, a)
				}
				return "", errors.New("400 Bad Request")
			},
			reason: deadline.ReasonNotRetryable, verdict: otelbudget.VerdictTooSlow,
			attempts: []wantAttempt{{"ceiling", "attempt_timeout", 100, "policy", 10}, {"ceiling", "error", 100, "", 0}},
		},
		{
			name: "panic", budget: time.Second,
			policy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 100 * ms},
			op:     func(context.Context, deadline.AttemptInfo) (string, error) { panic("kaboom") },
			reason: deadline.ReasonPanic, verdict: otelbudget.VerdictFailed,
			attempts: []wantAttempt{{"ceiling", "panic", 100, "", 0}},
		},
	}
	require.GreaterOrEqual(t, len(tests), 12)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				p := tt.policy
				p.Name, p.Floor, p.Hooks = "step", 20*ms, h.obs.Hooks()
				ctx := context.Background()
				if tt.cancelAt > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					defer cancel()
					time.AfterFunc(tt.cancelAt, cancel)
				}
				var err error
				do := func() { _, err = deadline.Do(ctx, deadline.New(tt.budget), p, tt.op) }
				switch tt.reason {
				case deadline.ReasonPanic:
					require.PanicsWithValue(t, "kaboom", do)
				default:
					do()
				}
				switch tt.reason {
				case deadline.ReasonPanic:
				case deadline.ReasonSuccess:
					require.NoError(t, err)
				default:
					var se *deadline.StopError
					require.ErrorAs(t, err, &se)
					require.Equal(t, tt.reason, se.Reason, "engine's stop reason")
				}
				h.requireAllEnded(t)

				calls := h.spans("step")
				require.Len(t, calls, 1)
				call := calls[0]
				assert.Equal(t, string(tt.verdict), strAttr(t, call, otelbudget.AttrVerdict))
				assert.Equal(t, tt.reason.String(), strAttr(t, call, otelbudget.AttrStopReason))
				assert.Equal(t, int64(len(tt.attempts)), intAttr(t, call, otelbudget.AttrAttempts))
				switch tt.verdict {
				case otelbudget.VerdictOK:
					assert.Equal(t, codes.Unset, call.Status().Code)
					assert.False(t, hasAttr(call, semconv.ErrorTypeKey))
				case otelbudget.VerdictCanceled:
					assert.Equal(t, codes.Unset, call.Status().Code, "a caller's cancellation is not an error")
					assert.Equal(t, "canceled", strAttr(t, call, semconv.ErrorTypeKey), "but error.type says why the call did not succeed")
				default:
					assert.Equal(t, codes.Error, call.Status().Code)
					assert.Equal(t, tt.reason.String(), strAttr(t, call, semconv.ErrorTypeKey), "a StopError's type is its reason")
				}

				spans := h.spans("step attempt")
				require.Len(t, spans, len(tt.attempts))
				var backoffs int
				for i, w := range tt.attempts {
					s := spans[i]
					n := int64(i + 1)
					assert.Equal(t, n, intAttr(t, s, otelbudget.AttrAttemptNumber))
					assert.Equal(t, w.limited, strAttr(t, s, otelbudget.AttrAttemptLimitedBy), "attempt %d limited_by", n)
					assert.Equal(t, w.ended, strAttr(t, s, otelbudget.AttrAttemptEndedBy), "attempt %d ended_by", n)
					assert.Equal(t, w.granted, intAttr(t, s, otelbudget.AttrAttemptGrantedMs), "attempt %d granted_ms", n)
					assert.False(t, hasAttr(s, semconv.HTTPRequestResendCountKey), "an INTERNAL attempt span is not an HTTP span")
					if w.backoff != "" {
						backoffs++
						assert.Equal(t, w.backoff, strAttr(t, s, otelbudget.AttrBackoffSource), "attempt %d backoff source", n)
						assert.Equal(t, w.delay, intAttr(t, s, otelbudget.AttrBackoffDelayMs), "attempt %d backoff delay", n)
						if w.backoff == "retry_after" {
							assert.Equal(t, w.delay, intAttr(t, s, otelbudget.AttrRetryAfterMs), "the server's ask")
						} else {
							assert.False(t, hasAttr(s, otelbudget.AttrRetryAfterMs))
						}
					} else {
						assert.False(t, hasAttr(s, otelbudget.AttrBackoffSource), "attempt %d: no backoff", n)
					}
					switch w.ended {
					case "completed":
						assert.Equal(t, codes.Unset, s.Status().Code, "attempt %d status", n)
						assert.False(t, hasAttr(s, semconv.ErrorTypeKey))
					case "canceled":
						assert.Equal(t, codes.Unset, s.Status().Code, "attempt %d status", n)
						assert.Equal(t, "canceled", strAttr(t, s, semconv.ErrorTypeKey))
					default:
						assert.Equal(t, codes.Error, s.Status().Code, "attempt %d status", n)
						assert.Equal(t, wantErrorType[w.ended], strAttr(t, s, semconv.ErrorTypeKey), "attempt %d error.type", n)
					}
				}
				assert.Len(t, call.Events(), backoffs, "one backoff event per backoff")
			})
		})
	}
}

package deadline_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every reason's message, exactly: what stopped the call, what was asked and
// what was left, then the last error unless it only repeats the reason.
func TestStopErrorMessages(t *testing.T) {
	const ms = time.Millisecond
	saturated := time.Duration(math.MaxInt64)
	flaky := deadline.Retryable(errFlaky)
	cases := []struct {
		name string
		err  deadline.StopError
		msg  string
	}{
		{"deadline, the op's context error",
			deadline.StopError{Name: "search", Reason: deadline.ReasonDeadline, Attempts: 1, Last: context.DeadlineExceeded, Remaining: 20 * ms, Floor: 20 * ms},
			"search: the shared deadline was reached (after 1 attempt): context deadline exceeded"},
		{"deadline, the sentinel itself",
			deadline.StopError{Name: "fetch", Reason: deadline.ReasonDeadline, Attempts: 1, Last: deadline.ErrDeadlineReached},
			"fetch: the shared deadline was reached (after 1 attempt)"},
		{"deadline, only wrapping the sentinel",
			deadline.StopError{Name: "fetch", Reason: deadline.ReasonDeadline, Attempts: 2, Last: deadline.Retryable(fmt.Errorf("%w", deadline.ErrDeadlineReached))},
			"fetch: the shared deadline was reached (after 2 attempts)"},
		{"deadline, wrapping the sentinel with more to say",
			deadline.StopError{Name: "fetch", Reason: deadline.ReasonDeadline, Attempts: 1, Last: fmt.Errorf("GET /doc: %w", deadline.ErrDeadlineReached)},
			"fetch: the shared deadline was reached (after 1 attempt): GET /doc: deadline: the shared deadline was reached"},
		{"deadline, no name",
			deadline.StopError{Reason: deadline.ReasonDeadline, Attempts: 1, Last: deadline.ErrDeadlineReached},
			"deadline: the shared deadline was reached (after 1 attempt)"},
		{"canceled, the op's context error",
			deadline.StopError{Name: "fetch", Reason: deadline.ReasonCanceled, Attempts: 1, Last: context.Canceled},
			"fetch: canceled by the caller (after 1 attempt): context canceled"},
		{"canceled, the sentinel",
			deadline.StopError{Name: "fetch", Reason: deadline.ReasonCanceled, Attempts: 1, Last: deadline.ErrCanceled},
			"fetch: canceled by the caller (after 1 attempt)"},
		{"canceled before the first attempt",
			deadline.StopError{Name: "fetch", Reason: deadline.ReasonCanceled},
			"fetch: canceled by the caller (after 0 attempts)"},
		{"refused before the first attempt",
			deadline.StopError{Name: "fetch", Reason: deadline.ReasonRefused, Remaining: 10 * ms, Floor: 20 * ms},
			"fetch: refused before attempt 1: 10ms left, floor 20ms"},
		{"refused after an attempt",
			deadline.StopError{Name: "step", Reason: deadline.ReasonRefused, Attempts: 1, Last: errFlaky, Remaining: 15 * ms, Floor: 20 * ms},
			"step: refused before attempt 2: 15ms left, floor 20ms (after 1 attempt): flaky"},
		{"refused, the sentinel",
			deadline.StopError{Name: "step", Reason: deadline.ReasonRefused, Attempts: 1, Last: deadline.ErrRefused, Remaining: 15 * ms, Floor: 20 * ms},
			"step: refused before attempt 2: 15ms left, floor 20ms (after 1 attempt)"},
		{"backoff too long",
			deadline.StopError{Name: "step", Reason: deadline.ReasonBackoffTooLong, Attempts: 1, Last: flaky, Remaining: 100 * ms, Floor: 20 * ms, Wait: 200 * ms},
			"step: backoff 200ms exceeds the 80ms left above the 20ms floor (after 1 attempt): flaky"},
		{"backoff too long, the sentinel",
			deadline.StopError{Name: "step", Reason: deadline.ReasonBackoffTooLong, Attempts: 1, Last: deadline.ErrBackoffExceedsBudget, Remaining: 100 * ms, Floor: 20 * ms, Wait: 200 * ms},
			"step: backoff 200ms exceeds the 80ms left above the 20ms floor (after 1 attempt)"},
		{"backoff in days",
			deadline.StopError{Name: "step", Reason: deadline.ReasonBackoffTooLong, Attempts: 1, Last: flaky, Remaining: 72 * time.Hour, Floor: 20 * ms, Wait: 1000 * time.Hour},
			"step: backoff 41.7 days exceeds the 3 days left above the 20ms floor (after 1 attempt): flaky"},
		{"Retry-After too long",
			deadline.StopError{Name: "fetch", Reason: deadline.ReasonRetryAfterTooLong, Attempts: 1, Last: deadline.RetryAfter(err503, 3*time.Second), Remaining: 890 * ms, Floor: 20 * ms, Wait: 3 * time.Second},
			"fetch: Retry-After 3s exceeds the 870ms left above the 20ms floor (after 1 attempt): 503 Service Unavailable (server asked to retry after 3s)"},
		{"Retry-After saturated",
			deadline.StopError{Name: "fetch", Reason: deadline.ReasonRetryAfterTooLong, Attempts: 1, Last: deadline.RetryAfter(err503, saturated), Remaining: 890 * ms, Floor: 20 * ms, Wait: saturated},
			"fetch: Retry-After more than 292 years exceeds the 870ms left above the 20ms floor (after 1 attempt): 503 Service Unavailable (server asked to retry after more than 292 years)"},
		{"Retry-After in years",
			deadline.StopError{Name: "fetch", Reason: deadline.ReasonRetryAfterTooLong, Attempts: 1, Last: deadline.ErrRetryAfterExceedsBudget, Remaining: time.Second, Wait: 3 * 365 * 24 * time.Hour},
			"fetch: Retry-After 3 years exceeds the 1s left above the 0s floor (after 1 attempt)"},
		{"exhausted on ceiling timeouts",
			deadline.StopError{Name: "fetch", Reason: deadline.ReasonExhausted, Attempts: 3, Last: &deadline.AttemptTimeoutError{Attempt: 3, Ceiling: 100 * ms, Err: context.DeadlineExceeded}},
			"fetch: attempts exhausted (after 3 attempts): attempt 3 exceeded its 100ms ceiling: context deadline exceeded"},
		{"exhausted, the op returned the ceiling's cause",
			deadline.StopError{Name: "fetch", Reason: deadline.ReasonExhausted, Attempts: 3, Last: &deadline.AttemptTimeoutError{Attempt: 3, Ceiling: 100 * ms, Err: deadline.ErrCeilingReached}},
			"fetch: attempts exhausted (after 3 attempts): attempt 3 exceeded its 100ms ceiling"},
		{"exhausted, the sentinel",
			deadline.StopError{Reason: deadline.ReasonExhausted, Attempts: 2, Last: deadline.ErrAttemptsExhausted},
			"deadline: attempts exhausted (after 2 attempts)"},
		{"not retryable",
			deadline.StopError{Name: "extract", Reason: deadline.ReasonNotRetryable, Attempts: 1, Last: errFatal},
			"extract: not retryable (after 1 attempt): fatal"},
		{"not retryable, the sentinel",
			deadline.StopError{Name: "extract", Reason: deadline.ReasonNotRetryable, Attempts: 1, Last: deadline.ErrNotRetryable},
			"extract: not retryable (after 1 attempt)"},
		{"panic (hooks only)",
			deadline.StopError{Name: "extract", Reason: deadline.ReasonPanic, Attempts: 1},
			"extract: panic (after 1 attempt)"},
		{"success (never returned)",
			deadline.StopError{Name: "extract", Reason: deadline.ReasonSuccess, Attempts: 1},
			"extract: success (after 1 attempt)"},
		{"unknown reason",
			deadline.StopError{Name: "extract", Reason: deadline.Reason(200), Attempts: 1, Last: errFatal},
			"extract: reason(200) (after 1 attempt): fatal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.msg, tc.err.Error())
			if tc.err.Last != nil {
				assert.ErrorIs(t, &tc.err, tc.err.Last, "a message without the last error still matches it")
			}
		})
	}
}

// The message Do itself builds when the op returns the deadline's cause: the
// deadline is said once.
func TestStopErrorFromDoDoesNotRepeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := policy(1, 0, 20*time.Millisecond)
		p.Name = "fetch"
		_, err := deadline.Do(context.Background(), deadline.New(100*time.Millisecond), p,
			func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
				<-ctx.Done()
				return 0, context.Cause(ctx)
			})
		require.Error(t, err)
		assert.Equal(t, "fetch: the shared deadline was reached (after 1 attempt)", err.Error())
		assert.ErrorIs(t, err, deadline.ErrDeadlineReached)
	})
}

func TestRetryAfterErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		delay time.Duration
		msg   string
	}{
		{3 * time.Second, "503 Service Unavailable (server asked to retry after 3s)"},
		{0, "503 Service Unavailable (server asked to retry after 0s)"},
		{48 * time.Hour, "503 Service Unavailable (server asked to retry after 48h0m0s)"},
		{49 * time.Hour, "503 Service Unavailable (server asked to retry after 2 days)"},
		{365 * 24 * time.Hour, "503 Service Unavailable (server asked to retry after 1 year)"},
		{time.Duration(math.MaxInt64), "503 Service Unavailable (server asked to retry after more than 292 years)"},
	} {
		assert.Equal(t, tc.msg, deadline.RetryAfter(err503, tc.delay).Error())
	}
}

func TestAttemptTimeoutErrorMessage(t *testing.T) {
	assert.Equal(t, "attempt 2 exceeded its 100ms ceiling: context deadline exceeded",
		(&deadline.AttemptTimeoutError{Attempt: 2, Ceiling: 100 * time.Millisecond, Err: context.DeadlineExceeded}).Error())
	assert.Equal(t, "attempt 2 exceeded its 100ms ceiling",
		(&deadline.AttemptTimeoutError{Attempt: 2, Ceiling: 100 * time.Millisecond, Err: deadline.ErrCeilingReached}).Error(),
		"the ceiling's own cause is not repeated")
	e := &deadline.AttemptTimeoutError{Attempt: 1, Ceiling: time.Duration(math.MaxInt64), Err: errFatal}
	assert.Equal(t, "attempt 1 exceeded its more than 292 years ceiling: fatal", e.Error())
	assert.ErrorIs(t, e, errFatal)
	assert.True(t, errors.Is(e, deadline.ErrCeilingReached))
}

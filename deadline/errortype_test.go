package deadline_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/deadlinebudget/budget/deadline"
)

// TestSentinelErrorTypes: every sentinel that can reach telemetry as an
// error (a context cause that net/http hands back, a StopError's reason)
// names a documented, low-cardinality error.type, found through wrapping the
// way semconv.ErrorType looks for it (errors.As to an ErrorType method), so
// that no span carries the name of an unexported Go type.
func TestSentinelErrorTypes(t *testing.T) {
	type errorTyper interface{ ErrorType() string }
	for _, tc := range []struct {
		err  error
		want string
	}{
		{deadline.ErrDeadlineReached, "deadline_exceeded"},
		{deadline.ErrCeilingReached, "attempt_timeout"},
		{deadline.ErrRefused, "refused"},
		{deadline.ErrBackoffExceedsBudget, "backoff_exceeds_budget"},
		{deadline.ErrRetryAfterExceedsBudget, "retry_after_exceeds_budget"},
		{deadline.ErrCanceled, "canceled"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			// As net/http and http.Client wrap a context cause.
			wrapped := &url.Error{Op: "Get", URL: "http://127.0.0.1/", Err: fmt.Errorf("net/http: request canceled: %w", tc.err)}
			var et errorTyper
			if assert.True(t, errors.As(wrapped, &et)) {
				assert.Equal(t, tc.want, et.ErrorType())
			}
		})
	}
	// Each budget reason's sentinel names the reason itself.
	for _, r := range []deadline.Reason{deadline.ReasonRefused, deadline.ReasonBackoffTooLong,
		deadline.ReasonRetryAfterTooLong, deadline.ReasonCanceled, deadline.ReasonRetryBudget} {
		et, ok := r.Sentinel().(errorTyper)
		if assert.True(t, ok, "%s sentinel has ErrorType", r) {
			assert.Equal(t, r.String(), et.ErrorType())
		}
	}
	// The context cause of a ceiling survives as the context's Cause.
	ctx, cancel := context.WithDeadlineCause(context.Background(), deadline.New(0).End(), deadline.ErrCeilingReached)
	defer cancel()
	<-ctx.Done()
	assert.Equal(t, "attempt_timeout", context.Cause(ctx).(errorTyper).ErrorType())
}

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

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

var errBroken = errors.New("broken")

// waitOp sleeps d, or until its context ends.
func waitOp(d time.Duration) func(context.Context, deadline.AttemptInfo) (int, error) {
	return func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
		select {
		case <-time.After(d):
			return 1, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// The run span tells the run's story: the budget, each step's time and
// verdict in the order they ran, the step the budget stopped, the outcome.
// Under synctest every duration is exact.
func TestRunSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		d := deadline.New(time.Second)
		ctx, run := h.obs.StartRun(context.Background(), "agent run", d)
		ctx = deadline.WithHooks(ctx, h.obs.Hooks())
		got, ok := deadline.FromContext(ctx)
		require.True(t, ok, "the run's context carries its deadline")
		assert.Equal(t, d.End(), got.End())

		_, err := deadline.Do(ctx, d, deadline.Policy{Name: "search", MaxAttempts: 1}, waitOp(50*time.Millisecond))
		require.NoError(t, err)
		// fetch reaches its 100ms ceiling once, then fails: operation_too_slow.
		fetch := deadline.Policy{Name: "fetch", MaxAttempts: 1, AttemptTimeout: 100 * time.Millisecond}
		_, fetchErr := deadline.Do(ctx, d, fetch, waitOp(time.Hour))
		require.Error(t, fetchErr)
		// extract hangs with no ceiling: the deadline (less the 20ms floor)
		// ends it at 980ms: deadline_too_small, the budget's stop.
		extract := deadline.Policy{Name: "extract", MaxAttempts: 2, Floor: 20 * time.Millisecond}
		_, extractErr := deadline.Do(ctx, d, extract, waitOp(time.Hour))
		require.ErrorIs(t, extractErr, deadline.ErrDeadlineReached)
		assert.Equal(t, otelbudget.RunBudgetExhausted, run.End(errors.Join(fetchErr, extractErr)))
		assert.Empty(t, run.End(nil), "only the first End counts")

		h.requireAllEnded(t)
		spans := h.spans("agent run")
		require.Len(t, spans, 1)
		s := spans[0]
		a := attrs(s)
		assert.Equal(t, int64(1000), intAttr(t, s, otelbudget.AttrBudgetMs))
		assert.Equal(t, int64(980), intAttr(t, s, otelbudget.AttrRunUsedMs))
		assert.Equal(t, int64(20), intAttr(t, s, otelbudget.AttrRemainingMs))
		assert.Equal(t, []string{"search", "fetch", "extract"}, a[otelbudget.AttrRunSteps].AsStringSlice())
		assert.Equal(t, []int64{50, 100, 830}, a[otelbudget.AttrRunStepSpentMs].AsInt64Slice())
		assert.Equal(t, []string{"ok", "operation_too_slow", "deadline_too_small"}, a[otelbudget.AttrRunStepVerdicts].AsStringSlice())
		assert.Equal(t, "extract", strAttr(t, s, otelbudget.AttrRunExhaustedBy))
		assert.Equal(t, otelbudget.RunBudgetExhausted, strAttr(t, s, otelbudget.AttrRunOutcome))
		assert.Equal(t, codes.Error, s.Status().Code)
		assert.Contains(t, s.Status().Description, "deadline")
		for _, name := range []string{"search", "fetch", "extract"} {
			calls := h.spans(name)
			require.Len(t, calls, 1, name)
			assert.Equal(t, s.SpanContext().SpanID(), calls[0].Parent().SpanID(), "%s is a child of the run", name)
		}
	})
}

// The outcome follows the error End is given; calls after End do not
// change the span.
func TestRunOutcome(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
		code codes.Code
	}{
		{"ok", nil, otelbudget.RunOK, codes.Unset},
		{"canceled", context.Canceled, otelbudget.RunCanceled, codes.Unset},
		{"canceled stop", &deadline.StopError{Reason: deadline.ReasonCanceled}, otelbudget.RunCanceled, codes.Unset},
		{"refused", &deadline.StopError{Reason: deadline.ReasonRefused}, otelbudget.RunBudgetExhausted, codes.Error},
		{"failed", errBroken, otelbudget.RunFailed, codes.Error},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				d := deadline.New(time.Second)
				ctx, run := h.obs.StartRun(context.Background(), "", d)
				_, err := deadline.Do(ctx, d, deadline.Policy{MaxAttempts: 1}, waitOp(10*time.Millisecond))
				require.NoError(t, err)
				assert.Equal(t, tc.want, run.End(tc.err))
				_, err = deadline.Do(ctx, d, deadline.Policy{Name: "late", MaxAttempts: 1}, waitOp(time.Millisecond))
				require.NoError(t, err)

				spans := h.spans("run")
				require.Len(t, spans, 1)
				s := spans[0]
				assert.Equal(t, tc.want, strAttr(t, s, otelbudget.AttrRunOutcome))
				assert.Equal(t, []string{"deadline.call"}, attrs(s)[otelbudget.AttrRunSteps].AsStringSlice(), "an unnamed step; the call after End is not counted")
				assert.Equal(t, []int64{10}, attrs(s)[otelbudget.AttrRunStepSpentMs].AsInt64Slice())
				assert.False(t, hasAttr(s, otelbudget.AttrRunExhaustedBy))
				assert.Equal(t, tc.code, s.Status().Code)
				assert.Equal(t, "internal", s.SpanKind().String())
			})
		})
	}
	var nilRun *otelbudget.Run
	assert.Empty(t, nilRun.End(nil), "a nil Run does nothing")
	assert.False(t, nilRun.Span().SpanContext().IsValid())
}

package otelbudgeteino

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
)

func TestNewRejectsBadConfig(t *testing.T) {
	bad := deadline.DefaultPolicy()
	bad.Floor = -1
	for name, cfg := range map[string]Config{
		"Config.Model":           {Model: bad},
		"Config.Tool":            {Tool: bad},
		`Config.Tools["search"]`: {Tools: map[string]ToolPolicy{"search": {Policy: bad}}},
		"Config.Reserve":         {Reserve: -time.Second},
		"Config.AbandonGrace":    {AbandonGrace: -time.Second},
	} {
		_, err := New(cfg)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, deadline.ErrInvalidPolicy, name)
		assert.Contains(t, err.Error(), name)
	}
	b, err := New(Config{})
	require.NoError(t, err)
	assert.Equal(t, "chat", b.modelStep, "no model name: the operation alone")
}

func TestStartNeedsADeadline(t *testing.T) {
	b, err := New(Config{Agent: "planner"})
	require.NoError(t, err)
	_, _, err = b.Start(context.Background(), deadline.Deadline{}, "")
	assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	//lint:ignore SA1012 a nil context is what is tested
	_, _, err = b.Start(nil, deadline.New(time.Second), "")
	assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	_, err = b.Run(context.Background(), deadline.New(time.Second), nil, nil)
	assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)

	ctx, run, err := b.Start(deadline.NewContext(context.Background(), deadline.New(time.Second)), deadline.Deadline{}, "")
	require.NoError(t, err)
	assert.Same(t, run, runFrom(ctx))
	assert.Equal(t, "planner", run.agent)
	res, err := run.End(nil, nil)
	require.NoError(t, err)
	assert.Nil(t, res.Answer)
}

// Eino's retry, made budget-aware: no retry of a context error or of the
// budget's stop; a wait that fits is granted, one that does not is refused
// and recorded as the run's stop.
func TestModelRetryConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := New(Config{ModelName: "gpt-4o"})
		require.NoError(t, err)
		rc := b.ModelRetryConfig(3)
		assert.Equal(t, 3, rc.MaxRetries)
		assert.Equal(t, 0, b.ModelRetryConfig(-1).MaxRetries)
		ctx, run, err := b.Start(context.Background(), deadline.New(time.Second), "planner")
		require.NoError(t, err)

		marked := deadline.Retryable(errors.New("429"))
		assert.False(t, rc.IsRetryAble(ctx, context.DeadlineExceeded))
		assert.False(t, rc.IsRetryAble(ctx, errors.New("400")), "not marked retryable")
		assert.False(t, rc.IsRetryAble(ctx, &deadline.StopError{Reason: deadline.ReasonRefused}), "the budget's stop is final")
		assert.True(t, rc.IsRetryAble(ctx, &deadline.StopError{Reason: deadline.ReasonExhausted, Last: deadline.RetryAfter(marked, 300*time.Millisecond)}))
		assert.Equal(t, 300*time.Millisecond, rc.BackoffFunc(ctx, 1))

		assert.False(t, rc.IsRetryAble(ctx, deadline.RetryAfter(marked, 2*time.Second)), "a wait that does not fit")
		res, err := run.End(nil, errors.New("eino: exceeds max retries"))
		stop, ok := errors.AsType[*deadline.StopError](err)
		require.True(t, ok)
		assert.Equal(t, deadline.ReasonRetryAfterTooLong, stop.Reason)
		assert.Equal(t, "chat gpt-4o", stop.Name)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "eino: exceeds max retries")
		assert.Same(t, stop, res.Stop)

		// Outside a run: deadline.IsRetryable and the policy's backoff.
		assert.True(t, rc.IsRetryAble(context.Background(), marked))
		assert.LessOrEqual(t, rc.BackoffFunc(context.Background(), 1), 50*time.Millisecond)
	})
}

// End turns a caller's context error after the deadline into the typed
// stop naming the run's step.
func TestEndTypesAContextError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := New(Config{Agent: "planner"})
		require.NoError(t, err)
		_, run, err := b.Start(context.Background(), deadline.New(time.Second), "")
		require.NoError(t, err)
		time.Sleep(time.Second)
		_, err = run.End(nil, context.DeadlineExceeded)
		stop, ok := errors.AsType[*deadline.StopError](err)
		require.True(t, ok)
		assert.Equal(t, "invoke_agent planner", stop.Name)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		_, again := run.End(nil, errors.New("second"))
		assert.NoError(t, again, "only the first End counts")
	})
}

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

// callScript returns an op for Call that records the contexts it ran in and
// answers with steps[attempt] (the last one repeats).
func callScript(ctxs *[]context.Context, steps ...func(context.Context) (int, error)) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		*ctxs = append(*ctxs, ctx)
		return steps[min(len(*ctxs), len(steps))-1](ctx)
	}
}

func ret(v int, err error) func(context.Context) (int, error) {
	return func(context.Context) (int, error) { return v, err }
}

func sleepFor(dur time.Duration, v int, err error) func(context.Context) (int, error) {
	return func(context.Context) (int, error) { time.Sleep(dur); return v, err }
}

func waitDone(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }

// The seed-000 contract for Call.
func TestCall(t *testing.T) {
	flaky := deadline.Retryable(errFlaky)
	canceled := func(context.Context) (int, error) { return 0, context.Canceled }
	cases := []struct {
		name    string
		budget  time.Duration
		retries int
		steps   []func(context.Context) (int, error)
		runs    int
		value   int
		err     error // the exact error returned (nil: success)
		isErr   []error
		notErr  []error
	}{
		{name: "seed example: two failures then 7", budget: 5 * time.Second, retries: 3,
			steps: []func(context.Context) (int, error){ret(0, flaky), ret(0, flaky), ret(7, nil)}, runs: 3, value: 7},
		{name: "first try", budget: time.Second, retries: 0, steps: []func(context.Context) (int, error){ret(1, nil)}, runs: 1, value: 1},
		{name: "non-retryable propagates untouched", budget: time.Second, retries: 3,
			steps: []func(context.Context) (int, error){ret(0, errFatal)}, runs: 1, err: errFatal},
		{name: "context.Canceled propagates untouched", budget: time.Second, retries: 3,
			steps: []func(context.Context) (int, error){canceled}, runs: 1, err: context.Canceled},
		{name: "op slower than the budget runs once", budget: 100 * time.Millisecond, retries: 5,
			steps: []func(context.Context) (int, error){waitDone}, runs: 1, err: context.DeadlineExceeded},
		{name: "retries exhausted returns the last retryable error", budget: time.Second, retries: 2,
			steps: []func(context.Context) (int, error){ret(0, deadline.Retryable(errFatal)), ret(0, flaky)}, runs: 3, err: flaky,
			isErr: []error{errFlaky}, notErr: []error{errFatal}},
		{name: "expired between attempts", budget: 100 * time.Millisecond, retries: 3,
			steps: []func(context.Context) (int, error){sleepFor(150*time.Millisecond, 0, flaky)}, runs: 1,
			isErr: []error{context.DeadlineExceeded, deadline.ErrRefused, errFlaky}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var ctxs []context.Context
				v, err := deadline.Call(context.Background(), deadline.New(tc.budget), callScript(&ctxs, tc.steps...), tc.retries)
				assert.Len(t, ctxs, tc.runs, "runs")
				for _, target := range tc.isErr {
					assert.ErrorIs(t, err, target)
				}
				for _, target := range tc.notErr {
					assert.NotErrorIs(t, err, target)
				}
				switch {
				case tc.err != nil:
					assert.True(t, err == tc.err, "returned as it is: got %v", err) // identity, not a wrap
				case tc.isErr == nil:
					require.NoError(t, err)
					assert.Equal(t, tc.value, v)
				}
			})
		})
	}
}

func TestCallExpiredBeforeAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, budget := range []time.Duration{0, -time.Second} {
			var ctxs []context.Context
			_, err := deadline.Call(context.Background(), deadline.New(budget), callScript(&ctxs, ret(1, nil)), 3)
			assert.Empty(t, ctxs, "op not called")
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.ErrorIs(t, err, deadline.ErrRefused)
		}
		d := deadline.New(time.Second)
		time.Sleep(time.Second)
		var ctxs []context.Context
		_, err := deadline.Call(context.Background(), d, callScript(&ctxs, ret(1, nil)), 0)
		assert.Empty(t, ctxs)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestCallDeadlineExceededIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// An op returning the context's error unchanged gets it back unchanged.
		var ctxs []context.Context
		_, err := deadline.Call(context.Background(), deadline.New(50*time.Millisecond), callScript(&ctxs, waitDone), 3)
		assert.Equal(t, context.DeadlineExceeded, err)
		assert.Len(t, ctxs, 1)
		assert.Equal(t, deadline.ErrDeadlineReached, context.Cause(ctxs[0]))
	})
}

func TestCallNegativeRetries(t *testing.T) {
	var ctxs []context.Context
	_, err := deadline.Call(context.Background(), deadline.New(time.Second), callScript(&ctxs, ret(1, nil)), -1)
	assert.Empty(t, ctxs, "op never called")
	pe, ok := errors.AsType[*deadline.PolicyError](err)
	require.True(t, ok)
	assert.Equal(t, "retries", pe.Field)
	assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	assert.Equal(t, "deadline: invalid retries -1: must be >= 0", err.Error())

	_, err = deadline.Call[int](context.Background(), deadline.New(time.Second), nil, 0)
	assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
}

// Each attempt runs in a fresh d.Scope(ctx), released when op returns.
func TestCallFreshScopes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type key struct{}
		parent := context.WithValue(context.Background(), key{}, "v")
		d := deadline.New(time.Second)
		var ctxs []context.Context
		var alive []bool
		flaky := deadline.Retryable(errFlaky)
		op := func(ctx context.Context) (int, error) {
			ctxs = append(ctxs, ctx)
			alive = append(alive, ctx.Err() == nil)
			dl, ok := ctx.Deadline()
			assert.True(t, ok && dl.Equal(d.End()), "scope ends at the deadline")
			assert.Equal(t, "v", ctx.Value(key{}), "derived from the caller's context")
			if len(ctxs) < 3 {
				return 0, flaky
			}
			return 3, nil
		}
		v, err := deadline.Call(parent, d, op, 3)
		require.NoError(t, err)
		assert.Equal(t, 3, v)
		assert.Equal(t, []bool{true, true, true}, alive)
		for _, c := range ctxs {
			assert.ErrorIs(t, c.Err(), context.Canceled, "released after op returned")
		}
		assert.NotSame(t, ctxs[0], ctxs[1])
		assert.NotSame(t, ctxs[1], ctxs[2])
		assert.Equal(t, time.Second, d.Remaining(), "retried at once, without a pause")
	})
}

// Call rejects the zero Deadline with the same PolicyError as Do, instead of
// a refusal: the zero Deadline is a mistake, not a spent budget.
func TestCallZeroDeadline(t *testing.T) {
	var ctxs []context.Context
	_, err := deadline.Call(context.Background(), deadline.Deadline{}, callScript(&ctxs, ret(1, nil)), 3)
	assert.Empty(t, ctxs, "op never called")
	pe, ok := errors.AsType[*deadline.PolicyError](err)
	require.True(t, ok, "got %v", err)
	assert.Equal(t, "Deadline", pe.Field)
	assert.Equal(t, "deadline: invalid Deadline Deadline{}: must be a Deadline from New, At or FromContext (the zero Deadline has no end)", err.Error())
	assert.NotErrorIs(t, err, context.DeadlineExceeded)

	_, derr := deadline.Do(context.Background(), deadline.Deadline{}, deadline.DefaultPolicy(),
		func(context.Context, deadline.AttemptInfo) (int, error) { return 1, nil })
	assert.Equal(t, derr, err, "the same error as Do")
}

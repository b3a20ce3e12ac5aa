package deadline_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Rule 9: every invalid field is rejected before anything runs, with one
// error naming the field to fix, its value and the allowed range.
func TestPolicyValidation(t *testing.T) {
	valid := deadline.DefaultPolicy
	cases := []struct {
		name  string
		edit  func(*deadline.Policy)
		field string
		msg   string // the whole message
	}{
		{"zero policy", func(p *deadline.Policy) { *p = deadline.Policy{} }, "Policy.MaxAttempts",
			"deadline: invalid Policy.MaxAttempts 0: must be >= 1"},
		{"negative attempts", func(p *deadline.Policy) { p.MaxAttempts = -1 }, "Policy.MaxAttempts",
			"deadline: invalid Policy.MaxAttempts -1: must be >= 1"},
		{"negative ceiling", func(p *deadline.Policy) { p.AttemptTimeout = -time.Millisecond }, "Policy.AttemptTimeout",
			"deadline: invalid Policy.AttemptTimeout -1ms: must be >= 0 (0: no ceiling)"},
		{"negative floor", func(p *deadline.Policy) { p.Floor = -time.Nanosecond }, "Policy.Floor",
			"deadline: invalid Policy.Floor -1ns: must be >= 0"},
		{"negative base", func(p *deadline.Policy) { p.Backoff.Base = -time.Second }, "Policy.Backoff.Base",
			"deadline: invalid Policy.Backoff.Base -1s: must be >= 0"},
		{"negative max", func(p *deadline.Policy) { p.Backoff = deadline.Backoff{Max: -time.Second} }, "Policy.Backoff.Max",
			"deadline: invalid Policy.Backoff.Max -1s: must be >= 0"},
		{"base above max", func(p *deadline.Policy) { p.Backoff.Base = time.Second }, "Policy.Backoff.Base",
			"deadline: invalid Policy.Backoff.Base 1s: must be <= Policy.Backoff.Max (400ms)"},
		{"base set, max forgotten", func(p *deadline.Policy) { p.Backoff = deadline.Backoff{Base: 50 * time.Millisecond} }, "Policy.Backoff.Max",
			"deadline: invalid Policy.Backoff.Max 0s: must be >= Policy.Backoff.Base (50ms); set Max to cap the backoff"},
		{"max set, base zero", func(p *deadline.Policy) { p.Backoff.Base = 0 }, "Policy.Backoff.Base",
			"deadline: invalid Policy.Backoff.Base 0s: must be > 0 when Policy.Backoff.Max is set (400ms); set Base to the first backoff, or Max to 0 for none"},
		{"unknown jitter", func(p *deadline.Policy) { p.Backoff.Jitter = deadline.JitterNone + 1 }, "Policy.Backoff.Jitter",
			"deadline: invalid Policy.Backoff.Jitter jitter(3): must be JitterFull, JitterEqual or JitterNone"},
		{"huge max below base", func(p *deadline.Policy) { p.Backoff = deadline.Backoff{Base: math.MaxInt64, Max: 1000 * time.Hour} }, "Policy.Backoff.Base",
			"deadline: invalid Policy.Backoff.Base more than 292 years: must be <= Policy.Backoff.Max (41.7 days)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.edit(&p)
			err := p.Validate()
			pe, ok := errors.AsType[*deadline.PolicyError](err)
			require.True(t, ok, "got %v", err)
			assert.Equal(t, tc.field, pe.Field)
			assert.Equal(t, tc.msg, err.Error())
			assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
			assert.Equal(t, "invalid_policy", pe.ErrorType())

			called := false
			_, derr := deadline.Do(context.Background(), deadline.New(time.Hour), p, func(context.Context, deadline.AttemptInfo) (int, error) {
				called = true
				return 0, nil
			})
			assert.False(t, called, "op never called")
			assert.Equal(t, err, derr, "Do returns the same error")
			assert.NotErrorIs(t, derr, context.DeadlineExceeded)
		})
	}
}

func TestPolicyValidAtEdges(t *testing.T) {
	for _, p := range []deadline.Policy{
		deadline.DefaultPolicy(),
		{MaxAttempts: 1},
		{MaxAttempts: 1, Backoff: deadline.Backoff{Base: time.Second, Max: time.Second, Jitter: deadline.JitterNone}},
		{MaxAttempts: 1, Backoff: deadline.Backoff{Jitter: deadline.JitterEqual}},
	} {
		assert.NoError(t, p.Validate(), "%+v", p)
	}
	p := deadline.DefaultPolicy()
	assert.Equal(t, 3, p.MaxAttempts)
	assert.Equal(t, 20*time.Millisecond, p.Floor)
	assert.Equal(t, deadline.Backoff{Base: 50 * time.Millisecond, Max: 400 * time.Millisecond, Jitter: deadline.JitterFull}, p.Backoff)
}

func TestDoRejectsZeroDeadlineAndNilOp(t *testing.T) {
	called := false
	op := func(context.Context, deadline.AttemptInfo) (int, error) { called = true; return 0, nil }
	_, err := deadline.Do(context.Background(), deadline.Deadline{}, deadline.DefaultPolicy(), op)
	pe, ok := errors.AsType[*deadline.PolicyError](err)
	require.True(t, ok)
	assert.Equal(t, "Deadline", pe.Field)
	assert.Equal(t, "deadline: invalid Deadline Deadline{}: must be a Deadline from New, At or FromContext (the zero Deadline has no end)", err.Error())
	assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	assert.False(t, called)

	_, err = deadline.Do[int](context.Background(), deadline.New(time.Hour), deadline.DefaultPolicy(), nil)
	pe, ok = errors.AsType[*deadline.PolicyError](err)
	require.True(t, ok)
	assert.Equal(t, "op", pe.Field)
	assert.Equal(t, "deadline: invalid op nil: must be a non-nil function", err.Error())
}

// A nil context is a clear PolicyError from Do and Call, not a nil-pointer
// panic deep inside; op is never called and no hook runs.
func TestNilContext(t *testing.T) {
	const msg = "deadline: invalid ctx nil: must be a non-nil context.Context (use context.Background())"
	var rec recorder
	p := deadline.DefaultPolicy()
	p.Hooks = rec.hooks("")
	called := false
	//lint:ignore SA1012 the nil context is what is tested
	_, err := deadline.Do(nil, deadline.New(time.Hour), p, func(context.Context, deadline.AttemptInfo) (int, error) {
		called = true
		return 0, nil
	})
	pe, ok := errors.AsType[*deadline.PolicyError](err)
	require.True(t, ok, "got %v", err)
	assert.Equal(t, "ctx", pe.Field)
	assert.Equal(t, msg, err.Error())
	assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	assert.False(t, called)
	assert.Empty(t, rec.events, "no hook runs")

	//lint:ignore SA1012 the nil context is what is tested
	_, cerr := deadline.Call(nil, deadline.New(time.Hour), func(context.Context) (int, error) {
		called = true
		return 0, nil
	}, 1)
	assert.Equal(t, err, cerr, "Call returns the same error as Do")
	assert.False(t, called)
}

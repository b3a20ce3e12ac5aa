package deadline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Rule 9: every invalid field is rejected before anything runs, with one
// error naming the field and the allowed range.
func TestPolicyValidation(t *testing.T) {
	valid := deadline.DefaultPolicy
	cases := []struct {
		name    string
		edit    func(*deadline.Policy)
		field   string
		allowed string
	}{
		{"zero policy", func(p *deadline.Policy) { *p = deadline.Policy{} }, "Policy.MaxAttempts", ">= 1"},
		{"negative attempts", func(p *deadline.Policy) { p.MaxAttempts = -1 }, "Policy.MaxAttempts", ">= 1"},
		{"negative ceiling", func(p *deadline.Policy) { p.AttemptTimeout = -time.Millisecond }, "Policy.AttemptTimeout", ">= 0 (0: no ceiling)"},
		{"negative floor", func(p *deadline.Policy) { p.Floor = -time.Nanosecond }, "Policy.Floor", ">= 0"},
		{"negative base", func(p *deadline.Policy) { p.Backoff.Base = -time.Second }, "Policy.Backoff.Base", ">= 0"},
		{"negative max", func(p *deadline.Policy) { p.Backoff = deadline.Backoff{Max: -time.Second} }, "Policy.Backoff.Max", ">= 0"},
		{"base above max", func(p *deadline.Policy) { p.Backoff.Base = time.Second }, "Policy.Backoff.Base", "<= Policy.Backoff.Max (400ms)"},
		{"base set, max zero", func(p *deadline.Policy) { p.Backoff.Max = 0 }, "Policy.Backoff.Base", "<= Policy.Backoff.Max (0s)"},
		{"max set, base zero", func(p *deadline.Policy) { p.Backoff.Base = 0 }, "Policy.Backoff.Base", "> 0 when Policy.Backoff.Max is set (400ms)"},
		{"unknown jitter", func(p *deadline.Policy) { p.Backoff.Jitter = deadline.JitterNone + 1 }, "Policy.Backoff.Jitter", "JitterFull, JitterEqual or JitterNone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.edit(&p)
			err := p.Validate()
			pe, ok := errors.AsType[*deadline.PolicyError](err)
			require.True(t, ok, "got %v", err)
			assert.Equal(t, tc.field, pe.Field)
			assert.Equal(t, tc.allowed, pe.Allowed)
			assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
			assert.Contains(t, err.Error(), tc.field)
			assert.Contains(t, err.Error(), tc.allowed)
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
	assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	assert.False(t, called)

	_, err = deadline.Do[int](context.Background(), deadline.New(time.Hour), deadline.DefaultPolicy(), nil)
	pe, ok = errors.AsType[*deadline.PolicyError](err)
	require.True(t, ok)
	assert.Equal(t, "op", pe.Field)
	assert.Equal(t, "deadline: invalid op nil: must be a non-nil function", err.Error())
}

package learn_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
)

func TestSuggestBudget(t *testing.T) {
	var rec learn.Recorder
	// auth: always succeeds in 1 … 10ms.
	for i := range 1000 {
		rec.Record("auth", deadline.EndedCompleted, time.Duration(1+i%10)*time.Millisecond, t0)
	}
	// fetch: 20 … 29ms, one attempt in ten a server error.
	for i := range 1000 {
		ended := deadline.EndedCompleted
		if i%10 == 0 {
			ended = deadline.EndedError
		}
		rec.Record("fetch", ended, time.Duration(20+i%10)*time.Millisecond, t0)
	}
	auth := deadline.Policy{Name: "auth", MaxAttempts: 2, Floor: 5 * time.Millisecond}
	fetch := deadline.DefaultPolicy() // 3 attempts, floor 20ms, full jitter 50ms … 400ms
	fetch.Name = "fetch"

	b, err := rec.SuggestBudget([]deadline.Policy{auth, fetch}, learn.PlanOptions{})
	require.NoError(t, err)
	require.Len(t, b.Steps, 2)
	a, f := b.Steps[0], b.Steps[1]

	assert.InDelta(t, 1.0, a.SuccessPerAttempt, 1e-9)
	assert.Equal(t, 1, a.Attempts)
	assert.InDelta(t, 1.0, a.ExpectedAttempts, 1e-9)
	assert.Zero(t, a.Backoff)
	assert.Equal(t, a.Ceiling, a.Time)

	// fetch: p = 0.9; its share of 0.99 is √0.99 ≈ 0.99499: two attempts
	// give 0.99, three 0.999.
	assert.InDelta(t, 0.9, f.SuccessPerAttempt, 1e-9)
	assert.Equal(t, 3, f.Attempts)
	assert.InDelta(t, 0.999, f.Success, 1e-9)
	assert.InDelta(t, 1.11, f.ExpectedAttempts, 1e-9)
	assert.Equal(t, 25*time.Millisecond+50*time.Millisecond, f.Backoff, "full jitter: half of the 50ms and 100ms caps")
	assert.Equal(t, 3*f.Ceiling+f.Backoff, f.Time)

	assert.Equal(t, a.Time+f.Time+20*time.Millisecond, b.Budget)
	assert.InDelta(t, 0.999, b.Success, 1e-9)
	assert.Equal(t, 0.99, b.Target)

	// A plan whose MaxAttempts cannot reach the target says so.
	fetch.MaxAttempts = 1
	b, err = rec.SuggestBudget([]deadline.Policy{auth, fetch}, learn.PlanOptions{})
	require.NoError(t, err)
	assert.InDelta(t, 0.9, b.Success, 1e-9)
	assert.Less(t, b.Success, b.Target)
}

func TestSuggestBudgetRejectsBadInput(t *testing.T) {
	var rec learn.Recorder
	for range 1000 {
		rec.Record("fails", deadline.EndedError, time.Millisecond, t0)
		rec.Record("ok", deadline.EndedCompleted, time.Millisecond, t0)
	}
	ok := deadline.Policy{Name: "ok", MaxAttempts: 1}
	_, err := rec.SuggestBudget(nil, learn.PlanOptions{})
	var oe *learn.OptionError
	assert.ErrorAs(t, err, &oe)
	_, err = rec.SuggestBudget([]deadline.Policy{ok}, learn.PlanOptions{Target: 1})
	assert.ErrorAs(t, err, &oe)
	_, err = rec.SuggestBudget([]deadline.Policy{ok}, learn.PlanOptions{SuggestOptions: learn.SuggestOptions{Margin: 0.5}})
	assert.ErrorAs(t, err, &oe)
	_, err = rec.SuggestBudget([]deadline.Policy{ok, {Name: "ok"}}, learn.PlanOptions{})
	var pe *deadline.PolicyError
	assert.ErrorAs(t, err, &pe)
	assert.Contains(t, err.Error(), "plan step 2")
	_, err = rec.SuggestBudget([]deadline.Policy{ok, {Name: "fails", MaxAttempts: 3}}, learn.PlanOptions{})
	assert.ErrorIs(t, err, learn.ErrNoSuccesses)
	_, err = rec.SuggestBudget([]deadline.Policy{{Name: "nope", MaxAttempts: 3}}, learn.PlanOptions{})
	assert.ErrorIs(t, err, learn.ErrUnknownStep)
}

package otelbudget_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
)

// SuggestRunBudget is learn's SuggestBudget over the steps' attempts, with
// each step's MaxAttempts and floor, the default attempts for a step that
// has none, and the default backoff.
func TestSuggestRunBudget(t *testing.T) {
	at := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	var fetch, extract learn.Histogram
	for i := range 2000 {
		d := time.Duration(20+i%60) * time.Millisecond
		fetch.Add(deadline.EndedCompleted, d, at)
		extract.Add(deadline.EndedCompleted, d/2, at)
		if i%50 == 0 {
			fetch.Add(deadline.EndedError, d, at)
		}
	}
	got, err := otelbudget.SuggestRunBudget([]otelbudget.PlanStep{
		{Name: "fetch", Attempts: &fetch, MaxAttempts: 3, Floor: 20 * time.Millisecond},
		{Name: "extract", Attempts: &extract},
	}, otelbudget.PlanOptions{})
	require.NoError(t, err)

	var rec learn.Recorder
	rec.Merge(&learn.Snapshot{Steps: map[string]*learn.Histogram{"fetch": &fetch, "extract": &extract}})
	want, err := rec.SuggestBudget([]deadline.Policy{
		{Name: "fetch", MaxAttempts: 3, Floor: 20 * time.Millisecond, Backoff: otelbudget.DefaultPlanBackoff},
		{Name: "extract", MaxAttempts: otelbudget.DefaultPlanAttempts, Backoff: otelbudget.DefaultPlanBackoff},
	}, learn.PlanOptions{})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Greater(t, got.Budget, time.Duration(0))
	assert.Equal(t, 2, got.Steps[0].Attempts, "fetch fails one attempt in 51: two attempts reach its share of the target")
}

// A plan it cannot budget fails, saying why.
func TestSuggestRunBudgetRefuses(t *testing.T) {
	var h learn.Histogram
	for _, tc := range []struct {
		steps []otelbudget.PlanStep
		want  string
	}{
		{nil, "otelbudget: an empty plan: want at least one step"},
		{[]otelbudget.PlanStep{{Name: "a"}}, `otelbudget: plan step 1 ("a"): no attempts (Attempts is nil)`},
		{[]otelbudget.PlanStep{{Name: "a", Attempts: &h}, {Name: "a", Attempts: &h}}, `otelbudget: plan step 2 ("a"): a step of that name is already in the plan`},
		{[]otelbudget.PlanStep{{Name: "a", Attempts: &h, Floor: -time.Second}}, `otelbudget: plan step 1 ("a"): MaxAttempts 0 and Floor -1s must not be negative`},
		{[]otelbudget.PlanStep{{Name: "a", Attempts: &h}}, `learn: plan step 1: learn: step "a": 0 samples recorded`},
	} {
		_, err := otelbudget.SuggestRunBudget(tc.steps, otelbudget.PlanOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.want)
	}
}

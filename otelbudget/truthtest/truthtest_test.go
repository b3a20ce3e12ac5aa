package truthtest

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The same set gives the same runs; another seed others. Every run keeps
// otelbudget's rules: no attempt starts with the floor or less left, a
// lease never reaches past the floor, every call ends within the budget.
func TestRunsDeterministicAndWithinTheRules(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	s := KnownTruth(t0)[0]
	a, err := s.Runs()
	require.NoError(t, err)
	b, err := s.Runs()
	require.NoError(t, err)
	require.Equal(t, a, b)
	s.Seed = 3
	c, err := s.Runs()
	require.NoError(t, err)
	require.NotEqual(t, a, c)

	outcomes := map[string]int{}
	for i, r := range a {
		assert.Equal(t, t0.Add(time.Duration(i)*Interval), r.Start)
		outcomes[r.Outcome]++
		for _, c := range r.Calls {
			assert.LessOrEqual(t, c.End, Budget-Floor+1, "a call ends by the floor")
			for _, at := range c.Attempts {
				assert.Greater(t, Budget-at.Start, Floor, "no attempt starts with the floor or less left")
				assert.LessOrEqual(t, at.Start+at.Granted, Budget-Floor, "no lease past the floor")
				assert.LessOrEqual(t, at.Granted, c.Ceiling)
			}
		}
	}
	assert.Equal(t, 1500, outcomes["ok"]+outcomes["failed"]+outcomes["budget_exhausted"])
	assert.NotZero(t, outcomes["failed"], "fetch down every 97th run")
}

// Fetch's σ puts about 11% of its true durations above its 100ms ceiling:
// the cut share of the whole data set is within 2 points of it.
func TestKnownTruthCutsAboutElevenPercentOfFetch(t *testing.T) {
	var attempts, cut int
	for _, s := range KnownTruth(time.Time{}) {
		runs, err := s.Runs()
		require.NoError(t, err)
		for _, r := range runs {
			for _, c := range r.Calls {
				for _, a := range c.Attempts {
					if c.Step == "fetch" {
						attempts++
						if a.Cut() {
							cut++
						}
					}
				}
			}
		}
	}
	assert.InDelta(t, 0.11, float64(cut)/float64(attempts), 0.02)
}

func TestRunsRejectsInvalidSets(t *testing.T) {
	step := func(f func(*Step)) []Step {
		p := Plan()
		f(&p[0])
		return p
	}
	for name, s := range map[string]Set{
		"negative N":         {N: -1},
		"negative FailEvery": {N: 1, FailEvery: -1},
		"empty plan":         {N: 1, Plan: []Step{}},
		"no failing step":    {N: 1, FailEvery: 3},
		"unknown failing":    {N: 1, FailEvery: 3, Failing: "fetc"},
		"no name":            {N: 1, Plan: step(func(s *Step) { s.Name = "" })},
		"zero ceiling":       {N: 1, Plan: step(func(s *Step) { s.Ceiling = 0 })},
		"zero median":        {N: 1, Plan: step(func(s *Step) { s.Median = 0 })},
		"zero attempts":      {N: 1, Plan: step(func(s *Step) { s.MaxAttempts = 0 })},
		"33 attempts":        {N: 1, Plan: step(func(s *Step) { s.MaxAttempts = 33 })},
		"NaN sigma":          {N: 1, Plan: step(func(s *Step) { s.Sigma = math.NaN() })},
		"infinite sigma":     {N: 1, Plan: step(func(s *Step) { s.Sigma = math.Inf(1) })},
		"errors above 1":     {N: 1, Plan: step(func(s *Step) { s.Errors = 1.5 })},
	} {
		runs, err := s.Runs()
		assert.Nil(t, runs, name)
		assert.ErrorIs(t, err, ErrInvalid, name)
	}
	runs, err := Set{N: 3, Plan: step(func(s *Step) { s.MaxAttempts = 32; s.Errors = 1 })}.Runs()
	require.NoError(t, err, "32 attempts: the backoff's bound stays an int64")
	assert.Len(t, runs, 3)
}

package learn_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// recordN records n attempts of step: durations i×step for i = 1 … n.
func recordN(rec *learn.Recorder, step string, ended deadline.EndedBy, n int, unit time.Duration) {
	for i := 1; i <= n; i++ {
		rec.Record(step, ended, time.Duration(i)*unit, t0.Add(time.Duration(i)*time.Second))
	}
}

// Bad input gives a clear error, never a panic.
func TestSuggestRejectsBadInput(t *testing.T) {
	var rec learn.Recorder
	recordN(&rec, "x", deadline.EndedCompleted, 2000, time.Millisecond)
	for name, tc := range map[string]struct {
		o     learn.SuggestOptions
		field string
	}{
		"quantile < 0":    {learn.SuggestOptions{Quantile: -0.5}, "quantile"},
		"quantile 1":      {learn.SuggestOptions{Quantile: 1}, "quantile"},
		"quantile > 1":    {learn.SuggestOptions{Quantile: 99}, "quantile"},
		"quantile NaN":    {learn.SuggestOptions{Quantile: math.NaN()}, "quantile"},
		"margin < 1":      {learn.SuggestOptions{Margin: 0.9}, "SuggestOptions.Margin"},
		"margin NaN":      {learn.SuggestOptions{Margin: math.NaN()}, "SuggestOptions.Margin"},
		"margin Inf":      {learn.SuggestOptions{Margin: math.Inf(1)}, "SuggestOptions.Margin"},
		"min > max":       {learn.SuggestOptions{Min: time.Second, Max: time.Millisecond}, "SuggestOptions.Min"},
		"min < 0":         {learn.SuggestOptions{Min: -1}, "SuggestOptions.Min"},
		"max < 0":         {learn.SuggestOptions{Max: -1}, "SuggestOptions.Max"},
		"min samples < 0": {learn.SuggestOptions{MinSamples: -1}, "SuggestOptions.MinSamples"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := rec.Suggest("x", tc.o)
			var oe *learn.OptionError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, tc.field, oe.Field)
			assert.Contains(t, err.Error(), "want ")
			assert.Zero(t, s.Ceiling)
			_, err = learn.Suggest("x", rec.Snapshot().Steps["x"], tc.o)
			assert.ErrorAs(t, err, &oe)
		})
	}
	_, err := rec.Suggest("nope", learn.SuggestOptions{})
	assert.ErrorIs(t, err, learn.ErrUnknownStep)
	assert.Contains(t, err.Error(), `"nope"`)
	var h learn.Histogram
	_, err = h.Quantile(0)
	assert.Error(t, err)
}

func TestSuggest(t *testing.T) {
	var rec learn.Recorder
	recordN(&rec, "x", deadline.EndedCompleted, 2000, time.Millisecond) // 1ms … 2s, uniform

	s, err := rec.Suggest("x", learn.SuggestOptions{})
	require.NoError(t, err)
	assert.InEpsilon(t, 1980*time.Millisecond, s.Estimate, learn.RelativeError, "p99 of 1ms … 2000ms")
	assert.InEpsilon(t, 1.2*float64(s.Estimate), float64(s.Ceiling), 1e-9)
	assert.Equal(t, 0.99, s.Quantile)
	assert.Equal(t, 1.2, s.Margin)
	assert.EqualValues(t, 2000, s.Samples)
	assert.Equal(t, t0.Add(time.Second), s.First)
	assert.Equal(t, t0.Add(2000*time.Second), s.Last)
	assert.Empty(t, s.Clamped)
	assert.Contains(t, s.String(), `"x": ceiling 2.`)

	s, err = rec.Suggest("x", learn.SuggestOptions{Quantile: 0.5, Margin: 1, Max: 900 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, 900*time.Millisecond, s.Ceiling)
	assert.Equal(t, "max", s.Clamped)
	assert.InEpsilon(t, time.Second, s.Estimate, learn.RelativeError)

	s, err = rec.Suggest("x", learn.SuggestOptions{Quantile: 0.5, Min: 5 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, s.Ceiling)
	assert.Equal(t, "min", s.Clamped)
}

// The default minimum is ten samples expected above the quantile, at least
// 100: 1000 for p99, 100 for p50.
func TestSuggestRefusesTooFewSamples(t *testing.T) {
	var rec learn.Recorder
	recordN(&rec, "x", deadline.EndedCompleted, 999, time.Millisecond)
	s, err := rec.Suggest("x", learn.SuggestOptions{})
	var ne *learn.NotEnoughSamplesError
	require.ErrorAs(t, err, &ne)
	assert.ErrorIs(t, err, learn.ErrNotEnoughSamples)
	assert.Equal(t, 1000, ne.Min)
	assert.EqualValues(t, 999, s.Samples, "the counts are still reported")
	assert.Zero(t, s.Ceiling)
	assert.Contains(t, err.Error(), `step "x": 999 samples recorded, 1000 needed to suggest a ceiling from p99`)

	_, err = rec.Suggest("x", learn.SuggestOptions{Quantile: 0.5})
	assert.NoError(t, err)
	_, err = rec.Suggest("x", learn.SuggestOptions{Quantile: 0.999})
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, 10000, ne.Min)
}

// Censoring: cut attempts are "longer than their cut". Below 1 - q of them,
// the quantile is estimated (Kaplan–Meier) among the completions; above,
// the suggestion says the quantile is hidden above the cuts.
func TestSuggestUnderCensoring(t *testing.T) {
	t.Run("few cuts: estimated", func(t *testing.T) {
		var rec learn.Recorder
		recordN(&rec, "x", deadline.EndedCompleted, 1990, time.Millisecond)
		for range 10 {
			rec.Record("x", deadline.EndedAttemptTimeout, 2500*time.Millisecond, t0)
		}
		s, err := rec.Suggest("x", learn.SuggestOptions{})
		require.NoError(t, err)
		assert.False(t, s.Censored)
		assert.InEpsilon(t, 1980*time.Millisecond, s.Estimate, learn.RelativeError)
		assert.EqualValues(t, 10, s.CeilingTimeouts)
	})
	t.Run("early deadline cuts: Kaplan–Meier, not a naive count", func(t *testing.T) {
		// 1000 completions at 1 … 1000ms, and 1000 attempts cut by the
		// deadline at 1ms: they say nothing about the tail, so the
		// median is that of the completions, not its 25th percentile.
		var rec learn.Recorder
		recordN(&rec, "x", deadline.EndedCompleted, 1000, time.Millisecond)
		for range 1000 {
			rec.Record("x", deadline.EndedDeadline, 500*time.Microsecond, t0)
		}
		s, err := rec.Suggest("x", learn.SuggestOptions{Quantile: 0.5, MinSamples: 1})
		require.NoError(t, err)
		assert.InEpsilon(t, 500*time.Millisecond, s.Estimate, learn.RelativeError)
	})
	t.Run("many cuts: censored", func(t *testing.T) {
		var rec learn.Recorder
		recordN(&rec, "x", deadline.EndedCompleted, 1900, 50*time.Microsecond) // up to 95ms
		for range 100 {
			rec.Record("x", deadline.EndedAttemptTimeout, 100*time.Millisecond, t0)
		}
		s, err := rec.Suggest("x", learn.SuggestOptions{})
		require.ErrorIs(t, err, learn.ErrCensored)
		assert.True(t, s.Censored)
		assert.Equal(t, 100*time.Millisecond, s.RaiseAbove)
		assert.Zero(t, s.Ceiling)
		assert.Contains(t, s.String(), "censored: raise the ceiling above 100ms")
		// p90 is below the cuts, and known.
		s, err = rec.Suggest("x", learn.SuggestOptions{Quantile: 0.9})
		require.NoError(t, err)
		assert.InEpsilon(t, 90*time.Millisecond, s.Estimate, learn.RelativeError)
	})
}

// TestQuantileRefusesWhenCutsHideTheTail: when more than 1 - q of the
// attempts were cut, the quantile is above the cuts, even if a few answers
// that arrived just after the ceiling fired would let Kaplan–Meier reach q
// (each then stands for every cut attempt before it). The demo met this:
// a 100ms ceiling cut 28% of fetch's attempts and p99 came out at 117ms.
func TestQuantileRefusesWhenCutsHideTheTail(t *testing.T) {
	var h learn.Histogram
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range 700 {
		h.Add(deadline.EndedCompleted, time.Duration(20+i%60)*time.Millisecond, at)
	}
	for range 280 {
		h.Add(deadline.EndedAttemptTimeout, 100*time.Millisecond, at)
	}
	for i := range 20 { // late answers just past the cut
		h.Add(deadline.EndedCompleted, time.Duration(101+i%17)*time.Millisecond, at)
	}
	_, err := h.Quantile(0.99)
	var ce *learn.CensoredError
	require.ErrorAs(t, err, &ce, "28%% cut > 1%%: p99 is above the cuts")
	assert.Equal(t, 100*time.Millisecond, ce.Above)
	assert.Equal(t, uint64(280), ce.Censored)
	// p50 is below the cuts and still estimated.
	p50, err := h.Quantile(0.5)
	require.NoError(t, err)
	assert.Less(t, p50, 100*time.Millisecond)
}

// A suggestion whose estimate × margin reaches 2⁶³ ns saturates at the
// largest Duration (or Max), instead of overflowing the float→int
// conversion to a negative value read as "below Min".
func TestSuggestSaturates(t *testing.T) {
	huge := time.Duration(8e18) // × 1.2 is past 2⁶³ ns
	var rec learn.Recorder
	for i := range 1000 {
		rec.Record("x", deadline.EndedCompleted, huge, t0.Add(time.Duration(i)*time.Second))
	}
	for _, tc := range []struct {
		name    string
		o       learn.SuggestOptions
		want    time.Duration
		clamped string
	}{
		{"unbounded", learn.SuggestOptions{}, math.MaxInt64, ""},
		{"with a minimum", learn.SuggestOptions{Min: time.Second}, math.MaxInt64, ""},
		{"with a maximum", learn.SuggestOptions{Max: time.Hour}, time.Hour, "max"},
		{"margin 1", learn.SuggestOptions{Margin: 1}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := rec.Suggest("x", tc.o)
			require.NoError(t, err)
			assert.InEpsilon(t, float64(huge), float64(s.Estimate), learn.RelativeError)
			if tc.want == 0 {
				assert.Equal(t, s.Estimate, s.Ceiling, "estimate × 1 fits")
			} else {
				assert.Equal(t, tc.want, s.Ceiling)
			}
			assert.Equal(t, tc.clamped, s.Clamped)
		})
	}
}

package learn_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// Reading a ceiling served by a prior (a step never recorded, and one
// recorded too little) allocates nothing, as reading a live one does
// (TestRecordAllocatesNothing).
func TestPriorCeilingAllocatesNothing(t *testing.T) {
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second}})
	assert.NoError(t, err)
	assert.NoError(t, live.SetPriors(map[string]learn.Prior{"fetch": {Ceiling: 80 * time.Millisecond, Quantile: 0.99}, "cold": {Ceiling: time.Hour, Quantile: 0.99}}))
	rec.Record("fetch", deadline.EndedCompleted, time.Millisecond, time.Now())
	for _, step := range []string{"fetch", "cold"} {
		_, ok := live.Ceiling(step)
		assert.True(t, ok, step)
		assert.Zero(t, testing.AllocsPerRun(1000, func() { _, _ = live.Ceiling(step) }), step)
	}
}

// BenchmarkLiveCeilingPrior is BenchmarkLiveCeiling's read served by a
// prior: the step was recorded too little to have a live ceiling of its
// own.
func BenchmarkLiveCeilingPrior(b *testing.B) {
	var rec learn.Recorder
	live, _ := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 100}, Every: 1})
	if err := live.SetPriors(map[string]learn.Prior{"fetch": {Ceiling: 80 * time.Millisecond, Quantile: 0.99}}); err != nil {
		b.Fatal(err)
	}
	rec.Record("fetch", deadline.EndedCompleted, time.Millisecond, time.Now())
	b.ReportAllocs()
	for b.Loop() {
		_, _ = live.Ceiling("fetch")
	}
}

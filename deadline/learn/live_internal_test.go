package learn

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
)

// TestLiveUpdateNotSkippedUnderContention: the Every-th sample of a step
// arrives while another goroutine is updating the step's estimate. The
// update it made due is not dropped until the next Every samples: it is
// made as soon as the running one ends (here, by the next recording).
func TestLiveUpdateNotSkippedUnderContention(t *testing.T) {
	var rec Recorder
	live, err := rec.Live(LiveOptions{SuggestOptions: SuggestOptions{Max: time.Second, MinSamples: 10}, Every: 10})
	require.NoError(t, err)
	at := time.Unix(1_700_000_000, 0)
	for range 9 {
		rec.Record("x", deadline.EndedCompleted, 100*time.Millisecond, at)
	}
	s := rec.lookup("x")
	require.NotNil(t, s)

	s.updating.Store(true) // another goroutine's update is running
	rec.Record("x", deadline.EndedCompleted, 100*time.Millisecond, at)
	_, ok := live.Ceiling("x")
	require.False(t, ok, "one update at a time")
	s.updating.Store(false) // it ends

	rec.Record("x", deadline.EndedCompleted, 100*time.Millisecond, at)
	lc, ok := live.Ceiling("x")
	require.True(t, ok, "the update due at sample 10 is made at sample 11, not at 20")
	assert.InEpsilon(t, 120*time.Millisecond, lc.Ceiling, 0.05)
	e, ok := live.Completion("x", 200*time.Millisecond)
	require.True(t, ok, "and the completion estimate with it")
	assert.EqualValues(t, 11, e.Samples)
}

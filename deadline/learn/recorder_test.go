package learn_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
)

var t0 = time.Unix(1_700_000_000, 0)

// sample is one recorded attempt.
type sample struct {
	step  string
	ended deadline.EndedBy
	d     time.Duration
	at    time.Time
}

// samples draws n attempts over three steps, a tenth of them cut.
func samples(seed uint64, n int) []sample {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]sample, n)
	for i := range out {
		ended := deadline.EndedCompleted
		switch r.IntN(10) {
		case 0:
			ended = deadline.EndedAttemptTimeout
		case 1:
			ended = deadline.EndedError
		case 2:
			ended = deadline.EndedDeadline
		}
		out[i] = sample{
			step:  fmt.Sprintf("step%d", r.IntN(3)),
			ended: ended,
			d:     time.Duration(r.ExpFloat64() * float64(20*time.Millisecond)),
			at:    t0.Add(time.Duration(r.IntN(1e6)) * time.Millisecond),
		}
	}
	return out
}

func recordAll(rec *learn.Recorder, ss []sample) {
	for _, s := range ss {
		rec.Record(s.step, s.ended, s.d, s.at)
	}
}

// Merging the snapshots of two recorders, or a snapshot into a recorder,
// equals recording both sets of attempts into one.
func TestMergeEqualsRecordingIntoOne(t *testing.T) {
	a, b := samples(1, 5000), samples(2, 3000)
	var ra, rb, both, into learn.Recorder
	recordAll(&ra, a)
	recordAll(&rb, b)
	recordAll(&both, a)
	recordAll(&both, b)

	merged := ra.Snapshot()
	merged.Merge(rb.Snapshot())
	assert.Equal(t, both.Snapshot(), merged)

	recordAll(&into, a)
	into.Merge(rb.Snapshot())
	assert.Equal(t, both.Snapshot(), into.Snapshot())

	var empty learn.Snapshot
	empty.Merge(both.Snapshot())
	assert.Equal(t, both.Snapshot(), &empty)
	empty.Merge(nil)
	assert.Equal(t, both.Snapshot(), &empty)
}

// Recording from many goroutines loses nothing (run with -race).
func TestConcurrentRecording(t *testing.T) {
	const workers, per = 8, 2000
	var rec, serial learn.Recorder
	var wg sync.WaitGroup
	for w := range workers {
		ss := samples(uint64(w), per)
		recordAll(&serial, ss)
		wg.Go(func() {
			recordAll(&rec, ss)
			_ = rec.Snapshot() // reads race with writes: must be safe
			_, _ = rec.Suggest("step0", learn.SuggestOptions{MinSamples: 1})
		})
	}
	wg.Wait()
	assert.Equal(t, serial.Snapshot(), rec.Snapshot())
}

func TestEdgeCases(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		var rec learn.Recorder
		assert.Empty(t, rec.Snapshot().Steps)
		assert.Nil(t, rec.Steps())
		_, err := rec.Suggest("x", learn.SuggestOptions{})
		assert.ErrorIs(t, err, learn.ErrUnknownStep)
		var h learn.Histogram
		_, err = h.Quantile(0.5)
		assert.ErrorIs(t, err, learn.ErrNoSamples)
		s, err := learn.Suggest("x", nil, learn.SuggestOptions{MinSamples: 1})
		assert.ErrorIs(t, err, learn.ErrNotEnoughSamples)
		assert.Zero(t, s.Ceiling)
	})
	t.Run("one sample", func(t *testing.T) {
		var rec learn.Recorder
		rec.Record("x", deadline.EndedCompleted, 30*time.Millisecond, t0)
		h := rec.Snapshot().Steps["x"]
		for _, q := range []float64{0.01, 0.5, 0.999} {
			got, err := h.Quantile(q)
			require.NoError(t, err)
			assert.InEpsilon(t, 30*time.Millisecond, got, learn.RelativeError)
		}
		assert.Equal(t, t0, h.First)
		assert.Equal(t, t0, h.Last)
		s, err := rec.Suggest("x", learn.SuggestOptions{MinSamples: 1})
		require.NoError(t, err)
		assert.InEpsilon(t, 36*time.Millisecond, s.Ceiling, learn.RelativeError)
	})
	t.Run("all censored", func(t *testing.T) {
		var rec learn.Recorder
		for i := range 200 {
			rec.Record("x", deadline.EndedAttemptTimeout, 100*time.Millisecond, t0.Add(time.Duration(i)*time.Second))
		}
		s, err := rec.Suggest("x", learn.SuggestOptions{MinSamples: 1})
		var ce *learn.CensoredError
		require.ErrorAs(t, err, &ce)
		assert.ErrorIs(t, err, learn.ErrCensored)
		assert.True(t, s.Censored)
		assert.Equal(t, 100*time.Millisecond, s.RaiseAbove)
		assert.Zero(t, s.Ceiling, "a censored step gets no ceiling, never the ceiling itself as p99")
		assert.Zero(t, s.Estimate)
		assert.EqualValues(t, 200, s.CeilingTimeouts)
		assert.Contains(t, err.Error(), `step "x": censored: raise the ceiling above 100ms`)
	})
	t.Run("zero and hours", func(t *testing.T) {
		var rec learn.Recorder
		rec.Record("zero", deadline.EndedCompleted, 0, t0)
		rec.Record("zero", deadline.EndedCompleted, -time.Second, t0) // counts as 0
		rec.Record("hours", deadline.EndedCompleted, 3*time.Hour, t0)
		rec.Record("days", deadline.EndedCompleted, 50*time.Hour, t0)
		snap := rec.Snapshot()
		got, err := snap.Steps["zero"].Quantile(0.99)
		require.NoError(t, err)
		assert.Zero(t, got, "never above the longest recorded")
		got, err = snap.Steps["hours"].Quantile(0.99)
		require.NoError(t, err)
		assert.InEpsilon(t, 3*time.Hour, got, learn.RelativeError)
		got, err = snap.Steps["days"].Quantile(0.99)
		require.NoError(t, err)
		assert.Equal(t, 50*time.Hour, got, "past the last bucket: the longest recorded")
	})
	t.Run("canceled and panicked are not recorded", func(t *testing.T) {
		var rec learn.Recorder
		rec.Record("x", deadline.EndedCanceled, time.Second, t0)
		rec.Record("x", deadline.EndedPanic, time.Second, t0)
		rec.Record("x", 0, time.Second, t0)
		assert.Empty(t, rec.Snapshot().Steps)
	})
}

// Steps past MaxSteps share one overflow series; known steps keep theirs.
func TestStepsAreBounded(t *testing.T) {
	var rec learn.Recorder
	for i := range learn.MaxSteps + 50 {
		rec.Record(fmt.Sprint("step", i), deadline.EndedCompleted, time.Millisecond, t0)
	}
	rec.Record("step0", deadline.EndedCompleted, time.Millisecond, t0)
	snap := rec.Snapshot()
	assert.Len(t, snap.Steps, learn.MaxSteps)
	require.NotNil(t, snap.Overflow)
	assert.EqualValues(t, 50, snap.Overflow.Samples)
	assert.EqualValues(t, 2, snap.Steps["step0"].Samples)
	_, err := rec.Suggest(fmt.Sprint("step", learn.MaxSteps+1), learn.SuggestOptions{})
	assert.ErrorIs(t, err, learn.ErrUnknownStep)
}

// The hooks record completions and errors at their duration, ceiling
// timeouts and deadline cuts censored at their grant, and skip canceled
// attempts.
func TestHooksRecordWhatDoSees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec learn.Recorder
		errServer := deadline.Retryable(errors.New("503"))
		ctx := context.Background()
		p := deadline.Policy{Name: "fetch", MaxAttempts: 3, AttemptTimeout: 100 * time.Millisecond, Hooks: rec.Hooks()}
		n := 0
		_, err := deadline.Do(ctx, deadline.New(time.Second), p, func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
			n++
			switch n {
			case 1: // an error after 10ms
				time.Sleep(10 * time.Millisecond)
				return 0, errServer
			case 2: // slow: the ceiling cuts it
				<-ctx.Done()
				return 0, ctx.Err()
			}
			time.Sleep(30 * time.Millisecond)
			return 1, nil
		})
		require.NoError(t, err)

		// A deadline cut: the grant is what is left less the floor.
		p.Floor = 20 * time.Millisecond
		_, err = deadline.Do(ctx, deadline.New(70*time.Millisecond), p, func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		})
		require.ErrorIs(t, err, deadline.ErrDeadlineReached)

		// A cancellation is not recorded.
		cctx, cancel := context.WithCancel(ctx)
		_, err = deadline.Do(cctx, deadline.New(time.Second), p, func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
			cancel()
			<-ctx.Done()
			return 0, ctx.Err()
		})
		require.ErrorIs(t, err, context.Canceled)

		h := rec.Snapshot().Steps["fetch"]
		require.NotNil(t, h)
		assert.EqualValues(t, 4, h.Samples)
		assert.EqualValues(t, 1, h.Successes)
		assert.EqualValues(t, 1, h.Errors())
		assert.EqualValues(t, 1, h.CeilingTimeouts)
		assert.EqualValues(t, 1, h.DeadlineCuts)
		assert.Equal(t, 30*time.Millisecond, h.Max)
		assert.Equal(t, 100*time.Millisecond, h.MaxCensored)
		assert.Equal(t, time.Now().UnixMilli(), h.Last.UnixMilli(), "the last sample ended with the deadline cut, just now")
		assert.Equal(t, time.Now().Add(-180*time.Millisecond).UnixMilli(), h.First.UnixMilli(), "the first one 10ms after the first call began")

		// Composed with other hooks, it still records.
		var ended int
		other := &deadline.Hooks{AttemptEnd: func(context.Context, deadline.AttemptInfo, deadline.AttemptResult) { ended++ }}
		p.Hooks = deadline.Compose(other, rec.Hooks())
		_, err = deadline.Do(ctx, deadline.New(time.Second), p, func(context.Context, deadline.AttemptInfo) (int, error) { return 1, nil })
		require.NoError(t, err)
		assert.Equal(t, 1, ended)
		assert.EqualValues(t, 5, rec.Snapshot().Steps["fetch"].Samples)
	})
}

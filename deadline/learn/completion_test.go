package learn_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
)

func liveFor(t testing.TB, rec *learn.Recorder, minSamples, every, halfLife int) *learn.Live {
	t.Helper()
	live, err := rec.Live(learn.LiveOptions{
		SuggestOptions: learn.SuggestOptions{Max: time.Minute, MinSamples: minSamples},
		Every:          every, HalfLife: halfLife,
	})
	require.NoError(t, err)
	return live
}

// Completion is the fraction of recent attempts that completed within the
// lease, once MinSamples are recorded.
func TestCompletionOfUniformDurations(t *testing.T) {
	var rec learn.Recorder
	live := liveFor(t, &rec, 200, 50, 10000)
	r := rand.New(rand.NewPCG(1, 2))
	_, ok := live.Completion("x", time.Second)
	assert.False(t, ok, "unknown step")
	for range 199 {
		rec.Record("x", deadline.EndedCompleted, 10*time.Millisecond+time.Duration(r.Int64N(int64(10*time.Millisecond))), t0)
	}
	_, ok = live.Completion("x", time.Second)
	assert.False(t, ok, "below MinSamples")
	for range 801 {
		rec.Record("x", deadline.EndedCompleted, 10*time.Millisecond+time.Duration(r.Int64N(int64(10*time.Millisecond))), t0)
	}
	for _, tc := range []struct {
		lease time.Duration
		p     float64
	}{
		{5 * time.Millisecond, 0},
		{12 * time.Millisecond, 0.2},
		{15 * time.Millisecond, 0.5},
		{19 * time.Millisecond, 0.9},
		{25 * time.Millisecond, 1},
		{time.Hour, 1},
	} {
		e, ok := live.Completion("x", tc.lease)
		require.True(t, ok, "%v", tc.lease)
		assert.InDelta(t, tc.p, e.P, 0.04, "lease %v", tc.lease)
		assert.Equal(t, uint64(1000), e.Samples)
	}
}

// Attempts cut by a limit count as "longer than their cut": they lower the
// estimate at and below the cut, and nothing is known of a longer lease.
func TestCompletionCountsCutAttemptsAsLonger(t *testing.T) {
	var rec learn.Recorder
	live := liveFor(t, &rec, 100, 100, 10000)
	for range 50 {
		rec.Record("x", deadline.EndedCompleted, 10*time.Millisecond, t0)
		rec.Record("x", deadline.EndedError, 10*time.Millisecond, t0)
		rec.Record("x", deadline.EndedDeadline, 50*time.Millisecond, t0)
		rec.Record("x", deadline.EndedAttemptTimeout, 50*time.Millisecond, t0)
	}
	for _, lease := range []time.Duration{10 * time.Millisecond, 30 * time.Millisecond, 50 * time.Millisecond} {
		e, ok := live.Completion("x", lease)
		require.True(t, ok, "%v", lease)
		assert.InDelta(t, 0.5, e.P, 1e-9, "errors complete; cut attempts do not (lease %v)", lease)
	}
	_, ok := live.Completion("x", 60*time.Millisecond)
	assert.False(t, ok, "longer than every cut: unknown")
}

// With decay, the estimate follows a provider that slows down and then
// recovers, within about two half-lives of samples.
func TestCompletionFollowsABrownout(t *testing.T) {
	var rec learn.Recorder
	live := liveFor(t, &rec, 20, 10, 40)
	rec1 := func(n int, ended deadline.EndedBy, d time.Duration) {
		for range n {
			rec.Record("x", ended, d, t0)
		}
	}
	rec1(200, deadline.EndedCompleted, 50*time.Millisecond)
	e, _ := live.Completion("x", 100*time.Millisecond)
	assert.Equal(t, 1.0, e.P)
	// Five times slower: every attempt is cut at its 100ms lease.
	rec1(40, deadline.EndedDeadline, 100*time.Millisecond)
	e, ok := live.Completion("x", 100*time.Millisecond)
	require.True(t, ok)
	assert.Less(t, e.P, 0.6, "one half-life of cuts: %v", e)
	rec1(160, deadline.EndedDeadline, 100*time.Millisecond)
	e, _ = live.Completion("x", 100*time.Millisecond)
	assert.Less(t, e.P, 0.05, "five half-lives of cuts: %v", e)
	// Recovered: 40 answers in 50ms bring it back over 50%.
	rec1(40, deadline.EndedCompleted, 50*time.Millisecond)
	e, _ = live.Completion("x", 100*time.Millisecond)
	assert.Greater(t, e.P, 0.5, "one half-life of answers: %v", e)
}

// Completion answers without allocating.
func TestCompletionAllocatesNothing(t *testing.T) {
	var rec learn.Recorder
	live := liveFor(t, &rec, 1, 1, 0)
	rec.Record("fetch", deadline.EndedCompleted, time.Millisecond, t0)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _, _ = live.Completion("fetch", 10*time.Millisecond) }))
}

// Wired into a policy, the learned floor refuses the step once its recent
// attempts show the lease would very likely not suffice, and a probe that
// finds the provider recovered brings the estimate back.
func TestLearnedFloorWithLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec learn.Recorder
		live := liveFor(t, &rec, 20, 5, 20)
		slow := true
		p := deadline.Policy{Name: "fetch", MaxAttempts: 1, Floor: 10 * time.Millisecond, Hooks: rec.Hooks(),
			LearnedFloor: &deadline.LearnedFloor{Estimator: live, Threshold: 0.05, ProbeShare: 0.1},
			Rand:         rand.New(rand.NewPCG(5, 6)).Int64N}
		op := func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
			d := 50 * time.Millisecond
			if slow {
				d *= 5
			}
			select {
			case <-time.After(d):
				return 1, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		call := func() error {
			_, err := deadline.Do(context.Background(), deadline.New(110*time.Millisecond), p, op)
			return err
		}
		var refused, cut int
		for range 200 {
			err := call()
			switch {
			case errors.Is(err, deadline.ErrRefusedLearned):
				refused++
			case errors.Is(err, deadline.ErrDeadlineReached):
				cut++
			}
		}
		assert.Less(t, cut, 60, "most doomed attempts are refused once learned")
		assert.Greater(t, refused, 140)
		assert.Positive(t, cut-20, "probes still go out")

		// Recovered: a probe succeeds within a few tens of calls, and the
		// estimate moves once Every samples (probes) have been recorded.
		slow = false
		calls := 0
		for ; calls < 200 && call() != nil; calls++ {
		}
		assert.Less(t, calls, 60, "a probe finds the recovery")
		for range 100 {
			_ = call()
		}
		ok := 0
		for range 20 {
			if call() == nil {
				ok++
			}
		}
		assert.Equal(t, 20, ok, "the estimate follows the recovered provider")
	})
}

// The learned floor's check adds no allocation to Do's success path.
func TestLearnedFloorAddsNoAllocation(t *testing.T) {
	var rec learn.Recorder
	live := liveFor(t, &rec, 1, 1, 0)
	rec.Record("fetch", deadline.EndedCompleted, time.Millisecond, t0)
	ctx := context.Background()
	d := deadline.New(time.Hour)
	op := func(ctx context.Context, _ deadline.AttemptInfo) (int, error) { return 1, ctx.Err() }
	base := deadline.Policy{Name: "fetch", MaxAttempts: 3, AttemptTimeout: time.Minute, Floor: 20 * time.Millisecond}
	learned := base
	learned.LearnedFloor = &deadline.LearnedFloor{Estimator: live, Threshold: 0.05, ProbeShare: 0.05}
	without := testing.AllocsPerRun(200, func() { _, _ = deadline.Do(ctx, d, base, op) })
	with := testing.AllocsPerRun(200, func() { _, _ = deadline.Do(ctx, d, learned, op) })
	assert.Equal(t, without, with)
}

// Successes counts an error as an attempt that never succeeds: fast errors
// raise Completion at every lease but not the chance of a result.
func TestSuccessesCountsErrorsAsNeverSucceeding(t *testing.T) {
	var rec learn.Recorder
	live := liveFor(t, &rec, 300, 300, 10000)
	ok := live.Successes()
	for range 100 {
		rec.Record("x", deadline.EndedError, 10*time.Millisecond, t0)
		rec.Record("x", deadline.EndedCompleted, 50*time.Millisecond, t0)
		rec.Record("x", deadline.EndedCompleted, 100*time.Millisecond, t0)
	}
	for _, tc := range []struct {
		lease      time.Duration
		any, succs float64
	}{
		{5 * time.Millisecond, 0, 0},
		{20 * time.Millisecond, 1.0 / 3, 0},
		{60 * time.Millisecond, 2.0 / 3, 1.0 / 3},
		{200 * time.Millisecond, 1, 2.0 / 3},
		{time.Hour, 1, 2.0 / 3},
	} {
		a, found := live.Completion("x", tc.lease)
		require.True(t, found, "%v", tc.lease)
		s, found := ok.Completion("x", tc.lease)
		require.True(t, found, "%v", tc.lease)
		assert.InDelta(t, tc.any, a.P, 1e-9, "completion within %v", tc.lease)
		assert.InDelta(t, tc.succs, s.P, 1e-9, "success within %v", tc.lease)
		assert.Equal(t, uint64(300), s.Samples)
	}
}

// Successes answers only when Completion does: below MinSamples, for an
// unknown step, and past the longest cut it reports false; cut attempts
// count as "longer than their cut" and errors stay at risk.
func TestSuccessesAnswersWhenCompletionDoes(t *testing.T) {
	var rec learn.Recorder
	live := liveFor(t, &rec, 200, 100, 10000)
	ok := live.Successes()
	_, found := ok.Completion("x", time.Second)
	assert.False(t, found, "unknown step")
	for range 50 {
		rec.Record("x", deadline.EndedCompleted, 10*time.Millisecond, t0)
		rec.Record("x", deadline.EndedError, 10*time.Millisecond, t0)
	}
	_, found = ok.Completion("x", time.Second)
	assert.False(t, found, "below MinSamples")
	for range 50 {
		rec.Record("x", deadline.EndedAttemptTimeout, 50*time.Millisecond, t0)
		rec.Record("x", deadline.EndedDeadline, 50*time.Millisecond, t0)
	}
	s, found := ok.Completion("x", 30*time.Millisecond)
	require.True(t, found)
	assert.InDelta(t, 0.25, s.P, 1e-9, "50 successes of 200 at risk")
	_, found = ok.Completion("x", 60*time.Millisecond)
	assert.False(t, found, "longer than every cut: unknown")
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _, _ = ok.Completion("x", 30*time.Millisecond) }))
}

// With Successes, the learned floor refuses a lease that fast errors would
// let through: most attempts answer 503 at once, and the few that succeed
// take longer than the lease.
func TestLearnedFloorWithSuccesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec learn.Recorder
		live := liveFor(t, &rec, 20, 5, 40)
		errUnavailable := errors.New("503")
		n := 0
		op := func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
			n++
			if n%10 != 0 {
				time.Sleep(time.Millisecond)
				return 0, errUnavailable
			}
			select {
			case <-time.After(200 * time.Millisecond):
				return 1, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		call := func(est deadline.CompletionEstimator) error {
			p := deadline.Policy{Name: "fetch", MaxAttempts: 1, Hooks: rec.Hooks(),
				LearnedFloor: &deadline.LearnedFloor{Estimator: est, Threshold: 0.05}}
			_, err := deadline.Do(context.Background(), deadline.New(100*time.Millisecond), p, op)
			return err
		}
		for range 100 {
			require.Error(t, call(live))
		}
		for range 20 {
			err := call(live)
			assert.NotErrorIs(t, err, deadline.ErrRefusedLearned, "nine in ten complete within the lease")
		}
		e, found := live.Successes().Completion("fetch", 100*time.Millisecond)
		require.True(t, found)
		assert.Less(t, e.P, 0.05, "none succeeds within the lease: %v", e)
		sent := n
		for range 20 {
			assert.ErrorIs(t, call(live.Successes()), deadline.ErrRefusedLearned)
		}
		assert.Equal(t, sent, n, "refused before anything was sent")
	})
}

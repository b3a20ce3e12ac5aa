package learn_test

import (
	"context"
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

func TestLiveRejectsBadOptions(t *testing.T) {
	var rec learn.Recorder
	var oe *learn.OptionError
	for name, o := range map[string]learn.LiveOptions{
		"no max":         {},
		"negative every": {SuggestOptions: learn.SuggestOptions{Max: time.Second}, Every: -1},
		"negative half":  {SuggestOptions: learn.SuggestOptions{Max: time.Second}, HalfLife: -1},
		"bad quantile":   {SuggestOptions: learn.SuggestOptions{Max: time.Second, Quantile: 2}},
		"min above max":  {SuggestOptions: learn.SuggestOptions{Max: time.Second, Min: time.Minute}},
	} {
		l, err := rec.Live(o)
		assert.ErrorAs(t, err, &oe, name)
		assert.Nil(t, l, name)
	}
}

// The live ceiling appears once MinSamples are recorded, is p99 × margin
// within the bounds, changes only every Every samples, and follows a
// provider that drifts.
func TestLiveCeilingFollowsDrift(t *testing.T) {
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{
		SuggestOptions: learn.SuggestOptions{Min: 5 * time.Millisecond, Max: time.Second, MinSamples: 200},
		Every:          50, HalfLife: 400,
	})
	require.NoError(t, err)
	assert.Contains(t, live.String(), "p99 × 1.2 in [5ms, 1s], every 50 samples, half-life 400 samples")
	r := rand.New(rand.NewPCG(3, 4))
	uniform := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo))) }

	_, ok := live.Ceiling("x")
	assert.False(t, ok, "unknown step")
	for range 199 {
		rec.Record("x", deadline.EndedCompleted, uniform(10*time.Millisecond, 20*time.Millisecond), t0)
	}
	_, ok = live.Ceiling("x")
	assert.False(t, ok, "below MinSamples: no ceiling, the policy's AttemptTimeout applies")

	var last time.Duration
	for i := 200; i <= 1000; i++ {
		rec.Record("x", deadline.EndedCompleted, uniform(10*time.Millisecond, 20*time.Millisecond), t0)
		lc, ok := live.Ceiling("x")
		if i < 200 || !ok {
			continue
		}
		if i%50 != 0 {
			assert.Equal(t, last, lc.Ceiling, "changed between two computations (sample %d)", i)
		}
		last = lc.Ceiling
		assert.Equal(t, 0.99, lc.Quantile)
	}
	assert.InEpsilon(t, 1.2*19.9e6, float64(last), 0.03, "p99 of 10 … 20ms × 1.2")

	// The provider slows down: 40 … 60ms. A few half-lives later the
	// ceiling follows.
	for range 3000 {
		rec.Record("x", deadline.EndedCompleted, uniform(40*time.Millisecond, 60*time.Millisecond), t0)
	}
	lc, _ := live.Ceiling("x")
	assert.InEpsilon(t, 1.2*59.8e6, float64(lc.Ceiling), 0.03)

	// Far above Max: clamped.
	for range 3000 {
		rec.Record("x", deadline.EndedCompleted, uniform(2*time.Second, 3*time.Second), t0)
	}
	lc, _ = live.Ceiling("x")
	assert.Equal(t, time.Second, lc.Ceiling)
}

// When the live ceiling cuts too many attempts to know the quantile, it is
// doubled, up to Max, rather than kept at (or reported as) the quantile.
func TestLiveCeilingRaisesWhenCensored(t *testing.T) {
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{
		SuggestOptions: learn.SuggestOptions{Max: 500 * time.Millisecond, MinSamples: 100},
		Every:          100, HalfLife: 100000,
	})
	require.NoError(t, err)
	for range 100 {
		rec.Record("x", deadline.EndedCompleted, 10*time.Millisecond, t0)
	}
	lc, ok := live.Ceiling("x")
	require.True(t, ok)
	assert.InEpsilon(t, 12*time.Millisecond, lc.Ceiling, 0.02)
	want := lc.Ceiling
	for range 4 {
		// Every attempt is now cut at the ceiling.
		for range 100 {
			rec.Record("x", deadline.EndedAttemptTimeout, lc.Ceiling, t0)
		}
		want = min(2*want, 500*time.Millisecond)
		lc, _ = live.Ceiling("x")
		assert.Equal(t, want, lc.Ceiling)
	}
}

// A policy using the live ceiling gets it on its attempts once learned,
// and reports it as a learned ceiling.
func TestLiveCeilingInDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec learn.Recorder
		live, err := rec.Live(learn.LiveOptions{
			SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 100}, Every: 10,
		})
		require.NoError(t, err)
		var infos []deadline.AttemptInfo
		seen := &deadline.Hooks{AttemptStart: func(ctx context.Context, a deadline.AttemptInfo) context.Context {
			infos = append(infos, a)
			return ctx
		}}
		p := deadline.Policy{Name: "fetch", MaxAttempts: 1, AttemptTimeout: 2 * time.Second, Ceiling: live,
			Hooks: deadline.Compose(seen, rec.Hooks())}
		for range 101 {
			_, err := deadline.Do(context.Background(), deadline.New(5*time.Second), p, func(context.Context, deadline.AttemptInfo) (int, error) {
				time.Sleep(50 * time.Millisecond)
				return 1, nil
			})
			require.NoError(t, err)
		}
		assert.Equal(t, deadline.LimitCeiling, infos[0].LimitedBy)
		assert.Equal(t, 2*time.Second, infos[0].Ceiling)
		lastInfo := infos[len(infos)-1]
		assert.Equal(t, deadline.LimitLearnedCeiling, lastInfo.LimitedBy)
		assert.InEpsilon(t, 60*time.Millisecond, lastInfo.Ceiling, 0.02)
		assert.Equal(t, 0.99, lastInfo.CeilingQuantile)
	})
}

// Recording from many goroutines in live mode, while policies read the
// ceiling, is safe (run with -race) and yields a ceiling.
func TestLiveConcurrent(t *testing.T) {
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 100}, Every: 10, HalfLife: 200})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range 2000 {
				rec.Record("x", deadline.EndedCompleted, time.Duration(1+r.IntN(20))*time.Millisecond, t0)
				_, _ = live.Ceiling("x")
			}
		})
	}
	wg.Wait()
	lc, ok := live.Ceiling("x")
	require.True(t, ok)
	assert.InEpsilon(t, 24*time.Millisecond, lc.Ceiling, 0.05)
}

// TestLiveHedgeDelay: a Live of p95 × 1 gives deadline.Do its hedge delay:
// the step's learned p95 once known, the fixed Hedge.Delay before. The
// operation's first attempt is slow (its p95 tail), and the hedge starts at
// the learned p95.
func TestLiveHedgeDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec learn.Recorder
		live, err := rec.Live(learn.LiveOptions{
			SuggestOptions: learn.SuggestOptions{Quantile: 0.95, Margin: 1, Max: time.Second, MinSamples: 100},
			Every:          20,
		})
		require.NoError(t, err)
		_, ok := live.HedgeDelay("fetch")
		assert.False(t, ok, "nothing learned yet: Hedge.Delay applies")
		for i := range 400 { // 10 … 49ms, evenly: p95 ≈ 47ms
			rec.Record("fetch", deadline.EndedCompleted, time.Duration(10+i%40)*time.Millisecond, t0)
		}
		d, ok := live.HedgeDelay("fetch")
		require.True(t, ok)
		assert.InEpsilon(t, float64(47*time.Millisecond), float64(d), 0.05, "the learned p95")

		p := deadline.Policy{Name: "fetch", MaxAttempts: 2, Hedge: &deadline.Hedge{Delay: 500 * time.Millisecond, MaxHedges: 1, DelaySource: live}}
		var hedgeAt time.Duration
		start := time.Now()
		_, err = deadline.DoHedged(context.Background(), deadline.New(time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
			if !a.Hedge {
				<-ctx.Done() // the slow first attempt: the hedge wins
				return 0, ctx.Err()
			}
			hedgeAt = time.Since(start)
			return 1, nil
		})
		require.NoError(t, err)
		assert.Equal(t, d, hedgeAt, "the hedge started at the learned p95, not the fixed 500ms")
	})
}

// The live ceiling of samples whose estimate × margin reaches 2⁶³ ns is
// Max, not absent.
func TestLiveCeilingSaturates(t *testing.T) {
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Hour, MinSamples: 100}, Every: 10})
	require.NoError(t, err)
	for range 200 {
		rec.Record("x", deadline.EndedCompleted, time.Duration(8e18), t0)
	}
	lc, ok := live.Ceiling("x")
	require.True(t, ok, "a live ceiling is served")
	assert.Equal(t, time.Hour, lc.Ceiling)
}

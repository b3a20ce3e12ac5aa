package learn_test

import (
	"context"
	"errors"
	"fmt"
	"math"
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

// A cold step is served its prior at once, with the prior's quantile; its
// own samples below MinSamples do not change that; at MinSamples its own
// ceiling takes over, and a later prior does not displace it.
func TestLivePriorServesAColdStepUntilItsOwnSamplesSuffice(t *testing.T) {
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{
		SuggestOptions: learn.SuggestOptions{Min: time.Millisecond, Max: time.Second, MinSamples: 200}, Every: 50,
	})
	require.NoError(t, err)
	require.NoError(t, live.SetPriors(map[string]learn.Prior{
		"fetch":  {Ceiling: 80 * time.Millisecond, Quantile: 0.995, Samples: 5000},
		"search": {Ceiling: 30 * time.Millisecond, Quantile: 0.99},
	}))
	assert.Contains(t, live.String(), ", 2 priors")

	lc, ok := live.Ceiling("fetch")
	require.True(t, ok, "never recorded, but a prior: served at once")
	assert.Equal(t, deadline.LearnedCeiling{Ceiling: 80 * time.Millisecond, Quantile: 0.995}, lc)
	d, ok := live.HedgeDelay("search")
	assert.True(t, ok)
	assert.Equal(t, 30*time.Millisecond, d)
	_, ok = live.Ceiling("other")
	assert.False(t, ok, "no prior, no samples")

	r := rand.New(rand.NewPCG(1, 2))
	for range 199 {
		rec.Record("fetch", deadline.EndedCompleted, time.Duration(10+r.IntN(10))*time.Millisecond, t0)
	}
	lc, _ = live.Ceiling("fetch")
	assert.Equal(t, 80*time.Millisecond, lc.Ceiling, "199 samples of its own: still the prior")
	rec.Record("fetch", deadline.EndedCompleted, 15*time.Millisecond, t0)
	lc, _ = live.Ceiling("fetch")
	assert.InEpsilon(t, 1.2*19e6, float64(lc.Ceiling), 0.02, "200: its own p99 × 1.2 replaces the prior")
	assert.Equal(t, 0.99, lc.Quantile, "and the Live's own quantile")

	require.NoError(t, live.SetPriors(map[string]learn.Prior{"fetch": {Ceiling: 500 * time.Millisecond, Quantile: 0.99}}))
	lc2, _ := live.Ceiling("fetch")
	assert.Equal(t, lc, lc2, "a new prior does not displace a ceiling learned here")
	p, ok := live.Prior("fetch")
	assert.True(t, ok, "it is kept")
	assert.Equal(t, 500*time.Millisecond, p.Ceiling)
	_, ok = live.Ceiling("search")
	assert.False(t, ok, "SetPriors replaced the set: search lost its prior")
}

// Max is the client's bound: a prior above it is served as Max, never
// more, also after Live is called again with a lower Max; below Min, Min.
func TestLivePriorNeverRaisesBeyondMax(t *testing.T) {
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Min: 5 * time.Millisecond, Max: 200 * time.Millisecond}})
	require.NoError(t, err)
	require.NoError(t, live.SetPriors(map[string]learn.Prior{
		"slow": {Ceiling: time.Hour, Quantile: 0.99},
		"huge": {Ceiling: math.MaxInt64, Quantile: 0.99},
		"fast": {Ceiling: time.Microsecond, Quantile: 0.99},
		"mid":  {Ceiling: 150 * time.Millisecond, Quantile: 0.99},
	}))
	for step, want := range map[string]time.Duration{"slow": 200 * time.Millisecond, "huge": 200 * time.Millisecond, "fast": 5 * time.Millisecond, "mid": 150 * time.Millisecond} {
		lc, ok := live.Ceiling(step)
		require.True(t, ok, step)
		assert.Equal(t, want, lc.Ceiling, step)
	}
	p, _ := live.Prior("slow")
	assert.Equal(t, time.Hour, p.Ceiling, "Prior reports what was given")

	live, err = rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: 100 * time.Millisecond}})
	require.NoError(t, err)
	lc, ok := live.Ceiling("mid")
	require.True(t, ok, "calling Live again keeps the priors")
	assert.Equal(t, 100*time.Millisecond, lc.Ceiling, "and the new Max bounds them")
}

// Bad priors are refused with an *OptionError naming the step and field,
// and change nothing.
func TestLivePriorRefusesBadPriors(t *testing.T) {
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second}})
	require.NoError(t, err)
	good := map[string]learn.Prior{"fetch": {Ceiling: 80 * time.Millisecond, Quantile: 0.99}}
	require.NoError(t, live.SetPriors(good))
	tooMany := map[string]learn.Prior{}
	for i := range learn.MaxSteps + 1 {
		tooMany[fmt.Sprint(i)] = learn.Prior{Ceiling: time.Second, Quantile: 0.5}
	}
	for name, tc := range map[string]struct {
		priors map[string]learn.Prior
		field  string
	}{
		"zero ceiling":     {map[string]learn.Prior{"a": {Quantile: 0.99}}, `Prior["a"].Ceiling`},
		"negative ceiling": {map[string]learn.Prior{"a": {Ceiling: -1, Quantile: 0.99}}, `Prior["a"].Ceiling`},
		"quantile 0":       {map[string]learn.Prior{"a": {Ceiling: 1}}, `Prior["a"].Quantile`},
		"quantile 1":       {map[string]learn.Prior{"a": {Ceiling: 1, Quantile: 1}}, `Prior["a"].Quantile`},
		"quantile NaN":     {map[string]learn.Prior{"a": {Ceiling: 1, Quantile: math.NaN()}}, `Prior["a"].Quantile`},
		"quantile Inf":     {map[string]learn.Prior{"a": {Ceiling: 1, Quantile: math.Inf(-1)}}, `Prior["a"].Quantile`},
		"one bad of two":   {map[string]learn.Prior{"a": {Ceiling: time.Second, Quantile: 0.9}, "b": {Ceiling: 0, Quantile: 0.9}}, `Prior["b"].Ceiling`},
		"too many":         {tooMany, "priors"},
	} {
		err := live.SetPriors(tc.priors)
		var oe *learn.OptionError
		require.True(t, errors.As(err, &oe), name)
		assert.Equal(t, tc.field, oe.Field, name)
		assert.Equal(t, good, live.Priors(), "%s: nothing changed", name)
	}
	require.NoError(t, live.SetPriors(nil))
	assert.Nil(t, live.Priors())
	_, ok := live.Ceiling("fetch")
	assert.False(t, ok, "nil removes every prior")
}

// SetPriors copies the map: the caller's later changes do not reach it.
func TestLivePriorCopiesTheMap(t *testing.T) {
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second}})
	require.NoError(t, err)
	m := map[string]learn.Prior{"fetch": {Ceiling: 80 * time.Millisecond, Quantile: 0.99}}
	require.NoError(t, live.SetPriors(m))
	m["fetch"] = learn.Prior{Ceiling: time.Millisecond, Quantile: 0.5}
	lc, _ := live.Ceiling("fetch")
	assert.Equal(t, 80*time.Millisecond, lc.Ceiling)
}

// In Do, a prior is a learned ceiling in every rule: the first attempt of
// a cold process is limited by it (learned_ceiling, the prior's quantile,
// cut at it); once MinSamples attempts were recorded, the process's own
// ceiling applies.
func TestLivePriorInDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec learn.Recorder
		live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 100}, Every: 10})
		require.NoError(t, err)
		require.NoError(t, live.SetPriors(map[string]learn.Prior{"fetch": {Ceiling: 40 * time.Millisecond, Quantile: 0.999}}))
		var infos []deadline.AttemptInfo
		var ends []deadline.AttemptResult
		seen := &deadline.Hooks{
			AttemptStart: func(ctx context.Context, a deadline.AttemptInfo) context.Context {
				infos = append(infos, a)
				return ctx
			},
			AttemptEnd: func(_ context.Context, _ deadline.AttemptInfo, r deadline.AttemptResult) { ends = append(ends, r) },
		}
		p := deadline.Policy{Name: "fetch", MaxAttempts: 1, AttemptTimeout: 2 * time.Second, Ceiling: live,
			Hooks: deadline.Compose(seen, rec.Hooks())}
		slow := 50 * time.Millisecond
		call := func() error {
			_, err := deadline.Do(context.Background(), deadline.New(5*time.Second), p, func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
				select {
				case <-time.After(slow):
					return 1, nil
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			})
			return err
		}
		assert.Error(t, call(), "cut at the prior's 40ms")
		assert.Equal(t, deadline.LimitLearnedCeiling, infos[0].LimitedBy)
		assert.Equal(t, 40*time.Millisecond, infos[0].Ceiling)
		assert.Equal(t, 0.999, infos[0].CeilingQuantile)
		assert.Equal(t, deadline.EndedAttemptTimeout, ends[0].EndedBy)

		slow = 20 * time.Millisecond
		for range 100 {
			require.NoError(t, call())
		}
		last := infos[len(infos)-1]
		assert.Equal(t, deadline.LimitLearnedCeiling, last.LimitedBy)
		assert.InEpsilon(t, 24*time.Millisecond, last.Ceiling, 0.02, "its own p99 × 1.2 took over")
		assert.Equal(t, 0.99, last.CeilingQuantile)
	})
}

// SetPriors while attempts read and record (run with -race).
func TestLivePriorConcurrent(t *testing.T) {
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 100}, Every: 10})
	require.NoError(t, err)
	require.NoError(t, live.SetPriors(map[string]learn.Prior{"x": {Ceiling: time.Millisecond, Quantile: 0.99}}))
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := range 2000 {
				if w == 0 {
					_ = live.SetPriors(map[string]learn.Prior{"x": {Ceiling: time.Duration(1+i%50) * time.Millisecond, Quantile: 0.99}})
					continue
				}
				rec.Record("x", deadline.EndedCompleted, 5*time.Millisecond, t0)
				lc, ok := live.Ceiling("x")
				assert.True(t, ok)
				assert.Positive(t, lc.Ceiling)
			}
		})
	}
	wg.Wait()
}

package deadline_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
)

// fixedCeiling is a CeilingSource that answers the same for every step and
// records the steps it was asked about.
type fixedCeiling struct {
	lc    deadline.LearnedCeiling
	ok    bool
	asked []string
}

func (f *fixedCeiling) Ceiling(step string) (deadline.LearnedCeiling, bool) {
	f.asked = append(f.asked, step)
	return f.lc, f.ok
}

// recordHooks returns hooks that keep every AttemptInfo, AttemptResult and
// the CallResult.
func recordHooks(infos *[]deadline.AttemptInfo, results *[]deadline.AttemptResult, call *deadline.CallResult) *deadline.Hooks {
	return &deadline.Hooks{
		AttemptEnd: func(_ context.Context, a deadline.AttemptInfo, r deadline.AttemptResult) {
			*infos = append(*infos, a)
			*results = append(*results, r)
		},
		CallEnd: func(_ context.Context, r deadline.CallResult) { *call = r },
	}
}

// A learned ceiling below the remaining budget replaces AttemptTimeout,
// binds the grant, and is a ceiling in every rule: reaching it is an
// attempt timeout, counted as such, and the verdict is operation_too_slow.
func TestLearnedCeilingBindsTheGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fixedCeiling{lc: deadline.LearnedCeiling{Ceiling: 80 * time.Millisecond, Quantile: 0.99}, ok: true}
		var infos []deadline.AttemptInfo
		var results []deadline.AttemptResult
		var call deadline.CallResult
		p := deadline.Policy{Name: "fetch", MaxAttempts: 2, AttemptTimeout: 300 * time.Millisecond, Ceiling: src}
		p.Hooks = recordHooks(&infos, &results, &call)
		d := deadline.New(time.Second)
		_, err := deadline.Do(context.Background(), d, p, hang)

		var ate *deadline.AttemptTimeoutError
		require.ErrorAs(t, err, &ate)
		assert.Equal(t, 80*time.Millisecond, ate.Ceiling)
		require.Len(t, infos, 2)
		for i, a := range infos {
			assert.Equal(t, deadline.LimitLearnedCeiling, a.LimitedBy, "attempt %d", i+1)
			assert.Equal(t, 80*time.Millisecond, a.Ceiling)
			assert.Equal(t, 80*time.Millisecond, a.Granted)
			assert.Equal(t, 0.99, a.CeilingQuantile)
			assert.Equal(t, deadline.EndedAttemptTimeout, results[i].EndedBy)
			assert.Equal(t, 80*time.Millisecond, results[i].Duration)
		}
		assert.Equal(t, []string{"fetch", "fetch"}, src.asked, "consulted once per attempt, with the step")
		assert.Equal(t, 2, call.CeilingTimeouts)
		assert.Equal(t, 0, call.DeadlineCuts)
		assert.Equal(t, deadline.VerdictTooSlow, deadline.VerdictOf(call))
		assert.Equal(t, "learned_ceiling", deadline.LimitLearnedCeiling.String())
	})
}

// A source with no answer (ok=false, or a ceiling <= 0) leaves
// AttemptTimeout in force, and no quantile is reported.
func TestLearnedCeilingAbsentFallsBackToAttemptTimeout(t *testing.T) {
	for name, src := range map[string]*fixedCeiling{
		"not ok":        {lc: deadline.LearnedCeiling{Ceiling: time.Millisecond, Quantile: 0.99}},
		"zero ceiling":  {ok: true, lc: deadline.LearnedCeiling{Quantile: 0.99}},
		"neg. ceiling":  {ok: true, lc: deadline.LearnedCeiling{Ceiling: -time.Second, Quantile: 0.99}},
		"nil interface": nil,
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var infos []deadline.AttemptInfo
				var results []deadline.AttemptResult
				var call deadline.CallResult
				p := deadline.Policy{MaxAttempts: 1, AttemptTimeout: 300 * time.Millisecond}
				if src != nil {
					p.Ceiling = src
				}
				p.Hooks = recordHooks(&infos, &results, &call)
				_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, hang)
				require.ErrorIs(t, err, deadline.ErrCeilingReached)
				require.Len(t, infos, 1)
				assert.Equal(t, deadline.LimitCeiling, infos[0].LimitedBy)
				assert.Equal(t, 300*time.Millisecond, infos[0].Ceiling)
				assert.Zero(t, infos[0].CeilingQuantile)
			})
		})
	}
}

// A learned ceiling above what is left loses to the deadline: the grant is
// the deadline's, a cut is a deadline cut (not a ceiling timeout), and the
// attempt still says which learned ceiling was in force.
func TestLearnedCeilingAboveRemainingIsLimitedByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fixedCeiling{lc: deadline.LearnedCeiling{Ceiling: 2 * time.Second, Quantile: 0.9}, ok: true}
		var infos []deadline.AttemptInfo
		var results []deadline.AttemptResult
		var call deadline.CallResult
		p := deadline.Policy{MaxAttempts: 3, Floor: 20 * time.Millisecond, Ceiling: src}
		p.Hooks = recordHooks(&infos, &results, &call)
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, hang)
		require.ErrorIs(t, err, deadline.ErrDeadlineReached)
		require.Len(t, infos, 1)
		assert.Equal(t, deadline.LimitDeadline, infos[0].LimitedBy)
		assert.Equal(t, 980*time.Millisecond, infos[0].Granted)
		assert.Equal(t, 2*time.Second, infos[0].Ceiling)
		assert.Equal(t, 0.9, infos[0].CeilingQuantile)
		assert.Equal(t, deadline.EndedDeadline, results[0].EndedBy)
		assert.Equal(t, 0, call.CeilingTimeouts)
		assert.Equal(t, 1, call.DeadlineCuts)
		assert.Equal(t, deadline.VerdictDeadlineTooSmall, deadline.VerdictOf(call))
	})
}

// staticCeiling answers without allocating, as a real source must.
type staticCeiling struct{}

func (staticCeiling) Ceiling(string) (deadline.LearnedCeiling, bool) {
	return deadline.LearnedCeiling{Ceiling: time.Minute, Quantile: 0.99}, true
}

// A learned ceiling adds no allocation to Do's success path.
func TestLearnedCeilingAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	d := deadline.New(time.Hour)
	op := func(ctx context.Context, _ deadline.AttemptInfo) (int, error) { return 1, ctx.Err() }
	p := deadline.DefaultPolicy()
	p.AttemptTimeout = time.Minute
	plain := testing.AllocsPerRun(200, func() { _, _ = deadline.Do(ctx, d, p, op) })
	p.Ceiling = staticCeiling{}
	learned := testing.AllocsPerRun(200, func() { _, _ = deadline.Do(ctx, d, p, op) })
	assert.LessOrEqual(t, learned, plain)
}

// A CeilingSource that panics: the panic propagates, and the hooks that
// began are closed.
func TestLearnedCeilingPanicClosesTheCall(t *testing.T) {
	var call deadline.CallResult
	p := deadline.Policy{MaxAttempts: 1, Ceiling: panicCeiling{}, Hooks: &deadline.Hooks{
		CallEnd: func(_ context.Context, r deadline.CallResult) { call = r },
	}}
	assert.PanicsWithValue(t, "boom", func() {
		_, _ = deadline.Do(context.Background(), deadline.New(time.Second), p, hang)
	})
	assert.Equal(t, deadline.ReasonPanic, call.Reason)
	assert.False(t, errors.Is(call.Err, deadline.ErrCeilingReached))
}

type panicCeiling struct{}

func (panicCeiling) Ceiling(string) (deadline.LearnedCeiling, bool) { panic("boom") }
